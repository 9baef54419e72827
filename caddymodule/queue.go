package caddymodule

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/kvqueue"
	"github.com/fhirgate/fhirgate/internal/queue/riverqueue"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv"
)

// openQueue returns the durable job queue kept with kv: River on
// PostgreSQL, where several replicas share the jobs (its migrations run
// here, safe when replicas start together); on Badger, the queue kept in
// the store, for the one process that owns the directory.
func openQueue(ctx context.Context, kv store.KV, logger *zap.Logger) (queue.Queue, error) {
	if pg, ok := kv.(*pgkv.KV); ok {
		q, err := riverqueue.New(ctx, pg.Pool(), pgkv.PgxTx, queue.Options{}, logger)
		if err != nil {
			return nil, fmt.Errorf("opening the job queue: %w", err)
		}
		return q, nil
	}
	return kvqueue.New(kv, queue.Options{}, logger), nil
}

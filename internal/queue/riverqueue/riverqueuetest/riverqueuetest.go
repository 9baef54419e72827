// Package riverqueuetest opens the River queue of tests and benchmarks: a
// store KV on a PostgreSQL database and a queue on its pool, as a gateway
// replica has them.
package riverqueuetest

import (
	"context"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/riverqueue"
	"github.com/fhirgate/fhirgate/internal/store/pgkv"
)

// Open opens a KV on dsn, without its background expiry sweeper, and a
// River queue with options o on its pool. When tb
// ends the queue is stopped, then the KV closed; a test may stop the queue
// earlier.
func Open(tb testing.TB, dsn string, o queue.Options) (*pgkv.KV, *riverqueue.Queue) {
	tb.Helper()
	ctx := context.Background()
	kv, err := pgkv.Open(ctx, pgkv.Options{DSN: dsn, SweepInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	q, err := riverqueue.New(ctx, kv.Pool(), pgkv.PgxTx, o, nil)
	if err != nil {
		_ = kv.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = q.Stop(ctx)
		_ = kv.Close()
	})
	return kv, q
}

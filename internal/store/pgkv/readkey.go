package pgkv

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fhirgate/fhirgate/internal/store"
)

// ReadKey reads one key in one statement outside any transaction: one
// round trip, where a View around one Get costs two (BEGIN and SELECT, then
// COMMIT). A single statement sees one snapshot, so it answers as that
// View would. The store reads single records through it.
func (k *KV) ReadKey(ctx context.Context, key []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	v, err := k.readKey(ctx, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, unwritable(ctx, fmt.Errorf("reading key %q: %w", key, err))
	}
	return v, err
}

func (k *KV) readKey(ctx context.Context, key []byte) ([]byte, error) {
	callerCtx := ctx
	if k.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, k.timeout)
		defer cancel()
	}
	for stale := 0; ; stale++ {
		conn, err := k.pool.Acquire(ctx)
		if err != nil {
			if ctxErr := callerCtx.Err(); ctxErr != nil {
				return nil, ctxErr
			}
			return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
		}
		var v []byte
		err = conn.QueryRow(ctx, `SELECT value FROM fhirgate_kv WHERE key = $1 AND `+live, key).Scan(&v)
		// A pooled connection the server has dropped (see txn.send): a
		// read can always be sent again on another.
		lost := err != nil && (pgconn.SafeToRetry(err) || conn.Conn().IsClosed())
		conn.Release()
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil, store.ErrNotFound
		case err == nil:
			if v == nil {
				v = []byte{}
			}
			// pgx scans bytea into a new slice: the caller owns v.
			return v, nil
		case !lost || ctx.Err() != nil || stale >= int(k.pool.Config().MaxConns):
			return nil, err
		}
	}
}

// Interface guards
var _ store.PointReader = (*KV)(nil)

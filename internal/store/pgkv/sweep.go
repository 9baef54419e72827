package pgkv

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// sweepBatch is how many expired rows one DELETE removes, so that a sweep
// after a long pause holds its row locks briefly.
const sweepBatch = 1000

// sweepTimeout bounds one sweep pass.
const sweepTimeout = time.Minute

// sweepLoop deletes expired rows every sweepEvery until ctx is canceled.
func (k *KV) sweepLoop(ctx context.Context) {
	defer k.loops.Done()
	t := time.NewTicker(k.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sctx, cancel := context.WithTimeout(ctx, sweepTimeout)
			n, err := k.sweep(sctx)
			cancel()
			k.sweeps.Add(1)
			if err != nil && ctx.Err() == nil {
				k.logger.Error("sweeping expired keys", zap.Int64("deleted", n), zap.Error(err))
			}
		}
	}
}

// sweep deletes the rows that have expired, in batches, and returns how
// many it deleted. Replicas sweeping together skip each other's locked
// rows instead of waiting.
func (k *KV) sweep(ctx context.Context) (int64, error) {
	var total int64
	for {
		tag, err := k.pool.Exec(ctx, `DELETE FROM fhirgate_kv WHERE key IN (
	SELECT key FROM fhirgate_kv WHERE expires_at <= now() LIMIT $1 FOR UPDATE SKIP LOCKED
)`, sweepBatch)
		if err != nil {
			return total, fmt.Errorf("deleting expired keys: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < sweepBatch {
			return total, nil
		}
	}
}

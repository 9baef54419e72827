package kvqueue

import (
	"context"

	"github.com/fhirgate/fhirgate/internal/store"
)

// maxGroup bounds the writes that share one transaction: job records of
// a few KiB each stay well inside Badger's transaction size limit (a
// larger group fails as a whole and is then written one by one).
const maxGroup = 64

// groupedWrite is one queue write — an Enqueue, a claim, a job's outcome
// — waiting for a transaction shared with concurrent ones
// (groupcommit). With a transaction each, the outcome writes (one per
// job) queued every enqueue behind them: at 1,000 Subscription deliveries
// a second, a write's answer waited tens of milliseconds for its own
// enqueue (cmd/fhirgate-bench scenario 12).
type groupedWrite struct {
	ctx context.Context
	fn  func(store.Txn) error
}

// update runs fn in a transaction of the queue's KV, possibly together
// with concurrent writes. fn may run more than once (as in KV.Update), and
// sees the writes grouped before it.
func (q *Queue) update(ctx context.Context, fn func(store.Txn) error) error {
	return q.group.Do(ctx, &groupedWrite{ctx: ctx, fn: fn})
}

// updateUnsynced is update for the queue's own bookkeeping — a claim, a
// job's outcome, the removal of a gone job's waiting key — which need not
// wait for the disk: committed, it survives the process dying (kill -9),
// and a crash of the machine before the store's next sync only makes a
// job run again (or once more), which at-least-once delivery allows.
// On a KV without UpdateDeferred it is update.
func (q *Queue) updateUnsynced(ctx context.Context, fn func(store.Txn) error) error {
	return q.unsynced.Do(ctx, &groupedWrite{ctx: ctx, fn: fn})
}

// commitGroup writes a group in one transaction with update (KV.Update,
// or UpdateDeferred for the groups of Deferred Enqueues and of claims
// and outcomes). If it fails (one write fails, or the group is too large),
// each write is retried on its own so that only a failing one fails.
func commitGroup(batch []*groupedWrite, update func(context.Context, func(store.Txn) error) error) []error {
	errs := make([]error, len(batch))
	if len(batch) > 1 {
		err := update(context.Background(), func(tx store.Txn) error {
			for _, w := range batch {
				if err := w.fn(tx); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			return errs
		}
	}
	for i, w := range batch {
		errs[i] = update(w.ctx, w.fn)
	}
	return errs
}

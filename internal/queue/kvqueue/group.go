package kvqueue

import (
	"context"
	"sync"

	"github.com/fhirgate/fhirgate/internal/store"
)

// maxGroup bounds the writes that share one transaction: job records of
// a few KiB each stay well inside Badger's transaction size limit (a
// larger group fails as a whole and is then written one by one).
const maxGroup = 64

// groupCommit merges concurrent queue writes — Enqueues and the outcomes
// of finished jobs — into one transaction. Badger syncs its write-ahead
// log once per transaction in its single write goroutine, so with a
// transaction per write, the queue's outcome writes (one per job) queued
// every enqueue behind them: at 1,000 Subscription deliveries a second,
// a write's answer waited tens of milliseconds for its own enqueue
// (cmd/fhirgate-bench scenario 12). Each caller still returns only after
// its own write is committed and synced.
//
// The first caller to find no commit running leads: it takes every
// queued write, commits them together, tells each its result, and
// repeats while more arrived during the commit (as internal/store's
// grouped creates).
type groupCommit struct {
	mu      sync.Mutex
	queue   []*groupedWrite
	leading bool
}

type groupedWrite struct {
	ctx  context.Context
	fn   func(store.Txn) error
	done chan error
}

// update runs fn in a transaction of the queue's KV, possibly together
// with concurrent writes. fn may run more than once (as in KV.Update), and
// sees the writes grouped before it.
func (q *Queue) update(ctx context.Context, fn func(store.Txn) error) error {
	op := &groupedWrite{ctx: ctx, fn: fn, done: make(chan error, 1)}
	g := &q.group
	g.mu.Lock()
	g.queue = append(g.queue, op)
	if g.leading {
		g.mu.Unlock()
		return <-op.done
	}
	g.leading = true
	g.mu.Unlock()
	for {
		g.mu.Lock()
		batch := g.queue[:min(len(g.queue), maxGroup)]
		g.queue = g.queue[len(batch):]
		if len(batch) == 0 {
			g.leading = false
			g.mu.Unlock()
			break
		}
		g.mu.Unlock()
		q.commitGroup(batch)
	}
	return <-op.done
}

// commitGroup writes a group in one transaction. If it fails (one write
// fails, or the group is too large), each write is retried on its own so
// that only a failing one fails.
func (q *Queue) commitGroup(batch []*groupedWrite) {
	live := batch[:0:0]
	for _, op := range batch {
		if err := op.ctx.Err(); err != nil {
			op.done <- err
			continue
		}
		live = append(live, op)
	}
	if len(live) > 1 {
		err := q.kv.Update(context.Background(), func(tx store.Txn) error {
			for _, op := range live {
				if err := op.fn(tx); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			for _, op := range live {
				op.done <- nil
			}
			return
		}
	}
	for _, op := range live {
		op.done <- q.kv.Update(op.ctx, op.fn)
	}
}

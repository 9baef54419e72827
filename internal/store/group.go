package store

import (
	"context"
	"fmt"
	"sync"
)

// maxGroup bounds how many creates share one transaction, well inside
// Badger's transaction size limits for records of a few KiB.
const maxGroup = 128

// groupCommit merges concurrent creates into one transaction. Badger syncs
// its write-ahead log once per transaction, so a stream of independent
// writes (a Login per token exchange) would otherwise be capped by the
// disk's sync rate. Each caller still returns only after its own write is
// committed and synced: durability of acknowledged writes is unchanged.
//
// The first caller to find no commit running becomes the leader: it takes
// every queued write, commits them together, tells each waiter its result,
// and repeats while more arrived during the commit.
type groupCommit struct {
	mu      sync.Mutex
	queue   []*groupedWrite
	leading bool
}

type groupedWrite struct {
	ctx  context.Context
	w    *pendingWrite
	done chan error
}

// commit stores w, possibly together with concurrent writes.
func (s *Store) commitGrouped(ctx context.Context, w *pendingWrite) error {
	op := &groupedWrite{ctx: ctx, w: w, done: make(chan error, 1)}
	g := &s.group
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
		batch := g.queue
		if len(batch) > maxGroup {
			batch = batch[:maxGroup]
		}
		g.queue = g.queue[len(batch):]
		if len(batch) == 0 {
			g.leading = false
			g.mu.Unlock()
			break
		}
		g.mu.Unlock()
		s.commitBatch(batch)
	}
	return <-op.done
}

// commitBatch writes a batch in one transaction. If the transaction fails
// (one write conflicts or is invalid), each write is retried on its own so
// that only the failing one fails.
func (s *Store) commitBatch(batch []*groupedWrite) {
	live := batch[:0:0]
	for _, op := range batch {
		if err := op.ctx.Err(); err != nil {
			op.done <- err
			continue
		}
		live = append(live, op)
	}
	if len(live) == 0 {
		return
	}
	if len(live) > 1 {
		writes := make([]*pendingWrite, len(live))
		for i, op := range live {
			writes[i] = op.w
		}
		err := s.applyWrites(context.Background(), writes, false)
		for _, op := range live {
			s.changes.note(op.w.typ, op.w.r.Base().ID) // before any caller returns
		}
		if err == nil {
			for _, op := range live {
				op.done <- nil
			}
			return
		}
	}
	for _, op := range live {
		err := s.applyWrites(op.ctx, []*pendingWrite{op.w}, false)
		s.changes.note(op.w.typ, op.w.r.Base().ID)
		if err != nil {
			err = fmt.Errorf("writing %s/%s: %w", op.w.typ, op.w.r.Base().ID, err)
		}
		op.done <- err
	}
}

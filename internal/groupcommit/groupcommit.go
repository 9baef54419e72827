// Package groupcommit merges concurrent writes into one commit. A durable
// commit waits for the disk (Badger syncs its write-ahead log once per
// transaction; PostgreSQL flushes its WAL once per commit), so a stream of
// small independent writes — a subscribed write's trigger, a job's outcome
// — is otherwise capped by the disk's sync rate, and each waits behind all
// the others. Each caller still returns only after its own write is
// committed: durability of acknowledged writes is unchanged.
package groupcommit

import (
	"context"
	"sync"
)

// Group merges concurrent Do calls. The first caller to find no commit
// running leads: it takes every queued item (up to the group's maximum),
// commits them together, hands each its result, and repeats while more
// arrived during the commit.
type Group[T any] struct {
	max    int
	commit func(batch []T) []error

	mu      sync.Mutex
	queue   []*op[T]
	leading bool
}

type op[T any] struct {
	ctx  context.Context
	item T
	done chan error
}

// New returns a group that commits up to max items at once with commit,
// which returns each item's outcome (a slice as long as the batch).
func New[T any](max int, commit func(batch []T) []error) *Group[T] {
	return &Group[T]{max: max, commit: commit}
}

// Do commits item, possibly together with concurrent ones, and returns
// its outcome. An item whose ctx has ended when its group is committed is
// left out, with ctx's error.
func (g *Group[T]) Do(ctx context.Context, item T) error {
	o := &op[T]{ctx: ctx, item: item, done: make(chan error, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, o)
	if g.leading {
		g.mu.Unlock()
		return <-o.done
	}
	g.leading = true
	g.mu.Unlock()
	for {
		g.mu.Lock()
		batch := g.queue[:min(len(g.queue), g.max)]
		g.queue = g.queue[len(batch):]
		if len(batch) == 0 {
			g.leading = false
			g.mu.Unlock()
			break
		}
		g.mu.Unlock()
		live := batch[:0:0]
		for _, b := range batch {
			if err := b.ctx.Err(); err != nil {
				b.done <- err
				continue
			}
			live = append(live, b)
		}
		if len(live) == 0 {
			continue
		}
		items := make([]T, len(live))
		for i, b := range live {
			items[i] = b.item
		}
		errs := g.commit(items)
		for i, b := range live {
			b.done <- errs[i]
		}
	}
	return <-o.done
}

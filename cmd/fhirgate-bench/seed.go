package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
)

// Seeded records, written straight into a store directory before Caddy
// opens it: the project and client the Caddyfile also declares, users with
// memberships, and bots with identifiers (no code; the harness deploys
// code to a few of them through the admin API).
const (
	benchProject   = "bench"
	benchClient    = "bench-app"
	botSystem      = "https://bench"
	seedWriters    = 256
	maxBatchWrites = 200
)

// seedStore writes users and bots into the Badger store at dir through the
// store package, so every record carries exactly the indexes Caddy's
// fhirgate app will read.
func seedStore(ctx context.Context, dir string, users, bots int) error {
	db, err := badgerkv.Open(badgerkv.Options{Dir: dir})
	if err != nil {
		return fmt.Errorf("opening seed store: %w", err)
	}
	kv := newBatchKV(db)
	defer func() {
		kv.Close()
		_ = db.Close()
	}()
	st := store.New(kv, store.Options{})

	p := &store.Project{Name: benchProject}
	p.ID = benchProject
	if _, err := st.Put(ctx, p, store.PutOptions{}); err != nil {
		return fmt.Errorf("seeding project: %w", err)
	}
	err = parallel(ctx, users, func(ctx context.Context, i int) error {
		u := &store.User{Email: userEmail(i)}
		u.ID = "u" + strconv.Itoa(i)
		if _, err := st.Put(ctx, u, store.PutOptions{}); err != nil {
			return fmt.Errorf("seeding user %d: %w", i, err)
		}
		m := &store.ProjectMembership{
			Project: store.Reference{Reference: "Project/" + benchProject},
			User:    store.Reference{Reference: "User/" + u.ID},
			Profile: &store.Reference{Reference: "Practitioner/p" + strconv.Itoa(i)},
		}
		m.ID = "m" + strconv.Itoa(i)
		if _, err := st.Put(ctx, m, store.PutOptions{}); err != nil {
			return fmt.Errorf("seeding membership %d: %w", i, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return parallel(ctx, bots, func(ctx context.Context, i int) error {
		b := &store.Bot{Name: "bot" + strconv.Itoa(i), Identifier: []store.Identifier{{System: botSystem, Value: botValue(i)}}}
		b.ID = botID(i)
		b.Meta.Project = benchProject
		if _, err := st.Put(ctx, b, store.PutOptions{}); err != nil {
			return fmt.Errorf("seeding bot %d: %w", i, err)
		}
		return nil
	})
}

func botID(i int) string    { return "bot" + strconv.Itoa(i) }
func botValue(i int) string { return "bot" + strconv.Itoa(i) }

// parallel runs fn(0..n-1) on seedWriters goroutines.
func parallel(ctx context.Context, n int, fn func(context.Context, int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(seedWriters)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(ctx, i) })
	}
	return g.Wait()
}

// batchKV is a group-committing store.KV for seeding: concurrent Update
// calls are run together in one transaction of the underlying KV, so
// 200,000 records cost a few hundred synced commits instead of one each.
// If the combined transaction fails, each call is retried on its own so
// every caller gets its own error. (KV.Update functions must be free of
// side effects outside the transaction, which is what makes replaying
// them safe.)
type batchKV struct {
	inner store.KV
	reqs  chan batchReq
	wg    sync.WaitGroup
}

type batchReq struct {
	ctx  context.Context
	fn   func(store.Txn) error
	done chan error
}

func newBatchKV(inner store.KV) *batchKV {
	b := &batchKV{inner: inner, reqs: make(chan batchReq)}
	b.wg.Add(1)
	go b.loop()
	return b
}

func (b *batchKV) View(ctx context.Context, fn func(store.Txn) error) error {
	return b.inner.View(ctx, fn)
}

func (b *batchKV) Update(ctx context.Context, fn func(store.Txn) error) error {
	r := batchReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case b.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-r.done
}

// Close stops the batcher; the underlying KV stays open.
func (b *batchKV) Close() error {
	close(b.reqs)
	b.wg.Wait()
	return nil
}

func (b *batchKV) loop() {
	defer b.wg.Done()
	for first := range b.reqs {
		batch := []batchReq{first}
	collect:
		for len(batch) < maxBatchWrites {
			select {
			case r, ok := <-b.reqs:
				if !ok {
					break collect
				}
				batch = append(batch, r)
			default:
				break collect
			}
		}
		err := b.inner.Update(first.ctx, func(tx store.Txn) error {
			for _, r := range batch {
				if err := r.fn(tx); err != nil {
					return err
				}
			}
			return nil
		})
		for _, r := range batch {
			if err != nil {
				r.done <- b.inner.Update(r.ctx, r.fn)
				continue
			}
			r.done <- nil
		}
	}
}

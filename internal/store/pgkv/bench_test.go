package pgkv_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// benchStores gives the same store on Badger and on PostgreSQL, so one
// run compares them.
func benchStores(b *testing.B) map[string]func(*testing.B) *store.Store {
	return map[string]func(*testing.B) *store.Store{
		"badger": func(b *testing.B) *store.Store { return storetest.Open(b) },
		"postgres": func(b *testing.B) *store.Store {
			kv, err := pgkv.Open(context.Background(), pgkv.Options{DSN: pgkvtest.DSN(b), Timeout: -1})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = kv.Close() })
			return store.New(kv, store.Options{})
		},
	}
}

// BenchmarkCreateUser: concurrent durable creates (a record, its unique
// email index and the checks that go with them).
func BenchmarkCreateUser(b *testing.B) {
	for _, name := range []string{"badger", "postgres"} {
		b.Run(name, func(b *testing.B) {
			s := benchStores(b)[name](b)
			ctx := context.Background()
			var n atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					u := &store.User{Email: fmt.Sprintf("u%d@example.com", n.Add(1))}
					if err := s.Create(ctx, u, store.PutOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkUserByEmail: the lookup behind every exchange.
func BenchmarkUserByEmail(b *testing.B) {
	for _, name := range []string{"badger", "postgres"} {
		b.Run(name, func(b *testing.B) {
			s := benchStores(b)[name](b)
			ctx := context.Background()
			const users = 200
			for i := range users {
				if err := s.Create(ctx, &store.User{Email: fmt.Sprintf("u%d@example.com", i)}, store.PutOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			var n atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.UserByEmail(ctx, fmt.Sprintf("u%d@example.com", n.Add(1)%users)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// putAllBots is a declared config's batch: a project and n bots, each
// with an identifier (a unique index) and code attachments.
func putAllBots(n int) []store.Write {
	p := &store.Project{Name: "P"}
	p.ID = "p"
	ws := []store.Write{{Resource: p}}
	for i := range n {
		b := &store.Bot{Name: fmt.Sprintf("bot-%d", i), Identifier: []store.Identifier{{System: "https://example.com/bots", Value: fmt.Sprintf("bot-%d", i)}}}
		b.ID = fmt.Sprintf("bot-%d", i)
		b.Meta.Project = "p"
		b.SourceCode = &store.Attachment{ContentType: "text/javascript", URL: "Binary/" + b.ID + "-src", Title: "index.ts"}
		ws = append(ws, store.Write{Resource: b})
	}
	return ws
}

// BenchmarkPutAllBots: one PutAll of a project and 20,000 bots on
// PostgreSQL, all or nothing in one transaction (Badger refuses a batch
// this size with ErrTxnTooBig). Run with -benchtime=1x.
func BenchmarkPutAllBots(b *testing.B) {
	s := benchStores(b)["postgres"](b)
	ctx := context.Background()
	for b.Loop() {
		if err := s.PutAll(ctx, putAllBots(20000)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateLogin: the write of every token exchange, 32 at once as
// in the harness's exchange scenarios: concurrent sign-ins share a
// transaction (the store's group commit), which on PostgreSQL is one round
// trip with its BEGIN and COMMIT.
func BenchmarkCreateLogin(b *testing.B) {
	for _, name := range []string{"badger", "postgres"} {
		b.Run(name, func(b *testing.B) {
			s := benchStores(b)[name](b)
			ctx := context.Background()
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l := &store.Login{
						User:       store.Reference{Reference: "User/u1"},
						Membership: store.Reference{Reference: "ProjectMembership/m1"},
						Client:     &store.Reference{Reference: "ClientApplication/web"},
						Project:    &store.Reference{Reference: "Project/p1"},
						AuthMethod: "exchange", AuthTime: "2026-01-02T03:04:05Z", Scope: "openid offline",
						Granted: true, RefreshSecret: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
					}
					l.Meta.Project = "p1"
					if err := s.Create(ctx, l, store.PutOptions{TTL: time.Hour}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

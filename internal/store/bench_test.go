package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// bulkCreate stores resources in batched transactions, bypassing the
// per-resource transaction of Create, to build large benchmark fixtures in
// seconds instead of one fsync per resource. It writes exactly what write()
// writes (record plus all index keys) but without conflict checks.
func bulkCreate(b *testing.B, s *Store, rs []storable) {
	b.Helper()
	const batch = 1000
	now := s.now()
	for start := 0; start < len(rs); start += batch {
		chunk := rs[start:min(start+batch, len(rs))]
		err := s.kv.Update(context.Background(), func(tx Txn) error {
			for _, r := range chunk {
				base := r.Base()
				base.ResourceType = r.resourceType()
				base.Meta.VersionID = fmt.Sprintf("v-%s", base.ID)
				base.Meta.LastUpdated = FormatTime(now)
				r.normalize(now)
				if err := r.validate(); err != nil {
					return err
				}
				data, err := json.Marshal(r)
				if err != nil {
					return err
				}
				for _, e := range allIndexes(r) {
					var v []byte
					if e.unique {
						v = []byte(base.ID)
					}
					if err := tx.Set(e.key, v, 0); err != nil {
						return err
					}
				}
				if err := tx.Set(recordKey(r.resourceType(), base.ID), data, 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatalf("bulk create: %v", err)
		}
	}
}

func BenchmarkUserByEmail(b *testing.B) {
	for _, n := range []int{100, 100_000} {
		kv, _ := openTestKV(b)
		s := New(kv, Options{})
		users := make([]storable, n)
		for i := range users {
			u := &User{Email: fmt.Sprintf("user%d@example.com", i)}
			u.ID = fmt.Sprintf("u%d", i)
			users[i] = u
		}
		start := time.Now()
		bulkCreate(b, s, users)
		b.Logf("built %d users in %s", n, time.Since(start))

		b.Run(fmt.Sprintf("users=%d", n), func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				// Stride through the key space so reads are not all cache hits
				// on one block.
				i = (i + 7919) % n
				if _, err := s.UserByEmail(ctx, fmt.Sprintf("USER%d@example.com", i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBotByIdentifier(b *testing.B) {
	const n = 1000
	kv, _ := openTestKV(b)
	s := New(kv, Options{})
	p := seedProject(b, s, "p")
	bots := make([]storable, n)
	for i := range bots {
		bot := &Bot{Name: fmt.Sprintf("bot%d", i), Identifier: []Identifier{{System: "https://bots.example", Value: fmt.Sprintf("b%d", i)}}}
		bot.ID = fmt.Sprintf("bot%d", i)
		bot.Meta.Project = p.ID
		bots[i] = bot
	}
	bulkCreate(b, s, bots)
	ctx := context.Background()

	for _, tc := range []struct{ name, system string }{{"system", "https://bots.example"}, {"any-system", ""}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i = (i + 31) % n
				if _, err := s.BotByIdentifier(ctx, p.ID, tc.system, fmt.Sprintf("b%d", i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkConcurrentCreates shows what concurrency buys with SyncWrites on.
// Badger's write goroutine (DB.doWrites) batches commits queued while the
// previous batch is written and syncs the value log once per batch, but the
// memtable WAL once per transaction (see badgerOptions). Compare serial and
// parallel ns/op; `strace -f -c -e trace=msync` on this benchmark counts the
// syncs.
func BenchmarkConcurrentCreates(b *testing.B) {
	var seq atomic.Int64
	create := func(b *testing.B, s *Store) {
		u := &User{Email: fmt.Sprintf("c%d@example.com", seq.Add(1))}
		if err := s.Create(context.Background(), u, PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		s := New(mustOpenKV(b), Options{})
		for b.Loop() {
			create(b, s)
		}
	})
	for _, par := range []int{4, 16} {
		b.Run(fmt.Sprintf("parallel=%dxGOMAXPROCS", par), func(b *testing.B) {
			s := New(mustOpenKV(b), Options{})
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					create(b, s)
				}
			})
		})
	}
}

func mustOpenKV(b *testing.B) KV {
	kv, _ := openTestKV(b)
	return kv
}

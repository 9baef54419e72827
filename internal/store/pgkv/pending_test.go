package pgkv

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// TestPrefetchAndPendingWritesReadAsTheDatabase: a Get answered from
// prefetched values or unsent writes gives what the database would, before
// and after the writes are flushed, and an Update that fails after a flush
// leaves nothing.
func TestPrefetchAndPendingWritesReadAsTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kv := openKV(t, Options{DSN: pgkvtest.DSN(t)})
	if err := kv.Update(ctx, func(tx store.Txn) error {
		return errors.Join(tx.Set([]byte("a"), []byte("1"), 0), tx.Set([]byte("b"), []byte("2"), 0))
	}); err != nil {
		t.Fatal(err)
	}
	get := func(tx store.Txn, key string) string {
		t.Helper()
		v, err := tx.Get([]byte(key))
		if errors.Is(err, store.ErrNotFound) {
			return "<none>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	err := kv.Update(ctx, func(tx store.Txn) error {
		if err := tx.(store.Prefetcher).Prefetch([][]byte{[]byte("a"), []byte("b"), []byte("c")}); err != nil {
			return err
		}
		if a, b, c := get(tx, "a"), get(tx, "b"), get(tx, "c"); a != "1" || b != "2" || c != "<none>" {
			t.Errorf("prefetched: a=%s b=%s c=%s", a, b, c)
		}
		if err := errors.Join(tx.Set([]byte("a"), []byte("10"), 0), tx.Delete([]byte("b")), tx.Set([]byte("c"), []byte("30"), 0)); err != nil {
			return err
		}
		if a, b, c := get(tx, "a"), get(tx, "b"), get(tx, "c"); a != "10" || b != "<none>" || c != "30" {
			t.Errorf("after writing: a=%s b=%s c=%s", a, b, c)
		}
		var scanned []string
		if err := tx.Scan(nil, false, func(k, v []byte) error { scanned = append(scanned, string(k)+"="+string(v)); return nil }); err != nil {
			return err
		}
		if fmt.Sprint(scanned) != "[a=10 c=30]" {
			t.Errorf("scan after writing: %v", scanned)
		}
		if a, b, c := get(tx, "a"), get(tx, "b"), get(tx, "c"); a != "10" || b != "<none>" || c != "30" {
			t.Errorf("after the flush: a=%s b=%s c=%s", a, b, c)
		}
		return errors.New("changed my mind")
	})
	if err == nil {
		t.Fatal("the failing Update succeeded")
	}
	err = kv.View(ctx, func(tx store.Txn) error {
		if a, b, c := get(tx, "a"), get(tx, "b"), get(tx, "c"); a != "1" || b != "2" || c != "<none>" {
			t.Errorf("after the failed Update: a=%s b=%s c=%s", a, b, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPutAllBeyondBadgersLimitIsAllOrNothing: on PostgreSQL a batch has no
// ErrTxnTooBig: 6,000 bots (more than one flush of writes, beyond what one
// Badger transaction takes) are written whole, and a batch of as many whose
// last bot claims a taken identifier writes nothing.
func TestPutAllBeyondBadgersLimitIsAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgkvtest.DSN(t)
	s := store.New(openKV(t, Options{DSN: dsn}), store.Options{})
	bots := func(from, n int) []store.Write {
		p := &store.Project{Name: "P"}
		p.ID = "p"
		ws := []store.Write{{Resource: p}}
		for i := from; i < from+n; i++ {
			b := &store.Bot{Name: fmt.Sprintf("bot-%d", i), Identifier: []store.Identifier{{System: "https://example.com/bots", Value: fmt.Sprintf("bot-%d", i)}}}
			b.ID = fmt.Sprintf("bot-%d", i)
			b.Meta.Project = "p"
			ws = append(ws, store.Write{Resource: b})
		}
		return ws
	}
	if err := s.PutAll(ctx, bots(0, 6000)); err != nil {
		t.Fatal(err)
	}
	if n := pgkvtest.QueryInt(t, dsn, `SELECT count(*) FROM fhirgate_kv WHERE key LIKE 'r/Bot/%'`); n != 6000 {
		t.Fatalf("%d bots stored, want 6000", n)
	}
	if _, err := s.BotByIdentifier(ctx, "p", "https://example.com/bots", "bot-5999"); err != nil {
		t.Fatalf("the last bot's identifier: %v", err)
	}
	batch := bots(6000, 6000)
	last := batch[len(batch)-1].Resource.(*store.Bot)
	last.Identifier[0].Value = "bot-17" // taken by the first batch's bot-17
	if err := s.PutAll(ctx, batch); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a batch with a taken identifier: %v, want ErrConflict", err)
	}
	if n := pgkvtest.QueryInt(t, dsn, `SELECT count(*) FROM fhirgate_kv WHERE key LIKE 'r/Bot/%'`); n != 6000 {
		t.Fatalf("%d bots stored after the refused batch, want the first 6000", n)
	}
}

// TestWriteOnlyUpdatesRace: Updates that only write (sent with their BEGIN
// and COMMIT as one batch) racing on one key all succeed — a serialization
// failure inside the batch runs the Update again — and each one's writes
// are all there.
func TestWriteOnlyUpdatesRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kv := openKV(t, Options{DSN: pgkvtest.DSN(t)})
	const writers = 16
	errs := make(chan error, writers)
	for i := range writers {
		go func() {
			errs <- kv.Update(ctx, func(tx store.Txn) error {
				v := []byte(fmt.Sprint(i))
				return errors.Join(tx.Set([]byte("shared"), v, 0), tx.Set([]byte(fmt.Sprint("own-", i)), v, 0))
			})
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	err := kv.View(ctx, func(tx store.Txn) error {
		if _, err := tx.Get([]byte("shared")); err != nil {
			return err
		}
		for i := range writers {
			v, err := tx.Get([]byte(fmt.Sprint("own-", i)))
			if err != nil || string(v) != fmt.Sprint(i) {
				return fmt.Errorf("own-%d = %q, %v", i, v, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

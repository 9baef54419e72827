package storetest_test

import (
	"context"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// countingKV counts the store's write transactions.
type countingKV struct {
	store.KV
	updates int
}

func (k *countingKV) Update(ctx context.Context, fn func(store.Txn) error) error {
	k.updates++
	return k.KV.Update(ctx, fn)
}

// TestOpenIsRealAndClosedAtCleanup: Open's store keeps what is written in
// Badger on disk, through the KV WrapKV puts in front, and the Badger is
// closed when the test ends: the directory, whose lock an open Badger
// holds, opens again afterwards with the record in it.
func TestOpenIsRealAndClosedAtCleanup(t *testing.T) {
	dir := t.TempDir()
	var id string
	var counted *countingKV
	t.Run("write", func(t *testing.T) {
		st := storetest.Open(t,
			storetest.Badger(func(o *badgerkv.Options) { o.Dir = dir }),
			storetest.WrapKV(func(kv store.KV) store.KV { counted = &countingKV{KV: kv}; return counted }))
		p := &store.Project{Name: "kept"}
		if err := st.Create(context.Background(), p, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		id = p.ID
		if _, err := badgerkv.Open(badgerkv.Options{Dir: dir}); err == nil {
			t.Fatal("a second Badger opened the directory while the store was open")
		}
	})
	if counted == nil || counted.updates == 0 {
		t.Fatal("the store did not write through the wrapped KV")
	}
	st := storetest.Open(t, storetest.Badger(func(o *badgerkv.Options) { o.Dir = dir }))
	p, err := store.Get[store.Project](context.Background(), st, id)
	if err != nil || p.Name != "kept" {
		t.Fatalf("after reopening: %+v, %v", p, err)
	}
}

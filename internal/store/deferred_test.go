package store

import (
	"context"
	"sync/atomic"
	"testing"
)

// deferralCounter is a KV that counts which of Update and UpdateDeferred
// the store called, passing both to the real KV under it.
type deferralCounter struct {
	KV
	updates, deferred atomic.Int64
}

func (d *deferralCounter) Update(ctx context.Context, fn func(Txn) error) error {
	d.updates.Add(1)
	return d.KV.Update(ctx, fn)
}

func (d *deferralCounter) UpdateDeferred(ctx context.Context, fn func(Txn) error) error {
	d.deferred.Add(1)
	return d.KV.(DeferredUpdater).UpdateDeferred(ctx, fn)
}

func (d *deferralCounter) Flush(ctx context.Context) error {
	return d.KV.(DeferredUpdater).Flush(ctx)
}

// TestDeferredWritesSkipTheSyncWait: PutOptions.Deferred commits through
// UpdateDeferred, visible at once; a write without it keeps Update.
func TestDeferredWritesSkipTheSyncWait(t *testing.T) {
	kv, _ := openTestKV(t)
	if _, ok := kv.(DeferredUpdater); !ok {
		t.Fatalf("%T does not defer", kv)
	}
	d := &deferralCounter{KV: kv}
	s := New(d, Options{})
	ctx := context.Background()
	p := mustCreate(t, s, &Project{Name: "p"})
	before := d.updates.Load()
	evs := []Resource{&AuditEvent{Outcome: "0"}, &AuditEvent{Outcome: "4"}}
	for _, ev := range evs {
		ev.Base().Meta.Project = p.ID
	}
	if err := s.CreateAll(ctx, evs, PutOptions{Deferred: true}); err != nil {
		t.Fatal(err)
	}
	if d.deferred.Load() != 1 || d.updates.Load() != before {
		t.Fatalf("deferred batch: %d UpdateDeferred, %d Update; want 1, 0", d.deferred.Load(), d.updates.Load()-before)
	}
	var got AuditEvent
	if err := s.Read(ctx, "AuditEvent", evs[1].Base().ID, &got); err != nil || got.Outcome != "4" {
		t.Fatalf("reading a deferred event: %v, outcome %q", err, got.Outcome)
	}
	if err := s.Create(ctx, &AuditEvent{}, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if d.deferred.Load() != 1 || d.updates.Load() != before+1 {
		t.Fatal("a write without Deferred did not go through Update")
	}
}

// TestAllDeferred: a group commit defers only when every write may.
func TestAllDeferred(t *testing.T) {
	yes, no := &pendingWrite{o: PutOptions{Deferred: true}}, &pendingWrite{}
	for _, c := range []struct {
		ws   []*pendingWrite
		want bool
	}{
		{nil, false},
		{[]*pendingWrite{yes}, true},
		{[]*pendingWrite{yes, yes}, true},
		{[]*pendingWrite{yes, no}, false},
		{[]*pendingWrite{no, yes}, false},
	} {
		if got := allDeferred(c.ws); got != c.want {
			t.Errorf("allDeferred(%d writes) = %v, want %v", len(c.ws), got, c.want)
		}
	}
}

package kvqueue

import (
	"context"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
)

// TestJobWaitingWithoutItsCopyIsClaimed: a job enqueued by a version that
// kept no record in the waiting key (empty value) is still claimed, with
// its record read from its job key, and completed.
func TestJobWaitingWithoutItsCopyIsClaimed(t *testing.T) {
	db := openBadger(t)
	ctx := context.Background()
	r := &record{ID: newID(), Kind: "old", Args: []byte(`{"n":7}`), State: queue.StateAvailable, MaxAttempts: 3, RunAt: time.Now()}
	err := db.Update(ctx, func(tx store.Txn) error {
		if err := writeRecord(tx, r, 0); err != nil {
			return err
		}
		return tx.Set(waitingKey(r.RunAt, r.ID), nil, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	q, got := recordingQueue(t, db, "old")
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Stop(ctx) })
	select {
	case args := <-got:
		if args != `{"n":7}` {
			t.Fatalf("args %s", args)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job was not claimed")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := q.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if info.State == queue.StateCompleted {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %s, want completed", info.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestIndexSkipsCancelledAndFindsOthersJobs: a job the dispatcher's index
// holds but that was cancelled is never run, and a job written by
// another queue on the same store (not in this one's index) is found by
// the poll and run.
func TestIndexSkipsCancelledAndFindsOthersJobs(t *testing.T) {
	db := openBadger(t)
	ctx := context.Background()
	q, got := recordingQueue(t, db, "k")
	cancelled, err := q.Enqueue(ctx, queue.Job{Kind: "k", Args: []byte(`"cancelled"`)})
	if err != nil {
		t.Fatal(err)
	}
	if !q.idx.knows(cancelled.ID) {
		t.Fatal("an enqueued job is not in the index")
	}
	if err := q.Cancel(ctx, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	other := New(db, queue.Options{}, nil) // never started: only writes
	if _, err := other.Enqueue(ctx, queue.Job{Kind: "k", Args: []byte(`"other"`)}); err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Stop(ctx) })
	select {
	case args := <-got:
		if args != `"other"` {
			t.Fatalf("ran %s, want the other queue's job", args)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other queue's job was not run")
	}
	select {
	case args := <-got:
		t.Fatalf("ran %s as well", args)
	case <-time.After(200 * time.Millisecond):
	}
	if q.idx.knows(cancelled.ID) {
		t.Fatal("the cancelled job is still in the index")
	}
}

func openBadger(t *testing.T) *badgerkv.KV {
	t.Helper()
	db, err := badgerkv.Open(badgerkv.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// recordingQueue is a queue polling every 10 ms whose worker of kind
// sends each job's args to the channel returned.
func recordingQueue(t *testing.T, db *badgerkv.KV, kind string) (*Queue, chan string) {
	t.Helper()
	q := New(db, queue.Options{PollInterval: 10 * time.Millisecond}, nil)
	got := make(chan string, 4)
	if err := q.Register(kind, func(_ context.Context, d *queue.Delivery) error {
		got <- string(d.Args)
		return nil
	}, queue.KindOptions{}); err != nil {
		t.Fatal(err)
	}
	return q, got
}

// TestIndexHoldsBoundedRecords: beyond maxHeldRecords the index keeps a
// job's key and time but not its record (read by the claim instead), and
// hands jobs out by run time.
func TestIndexHoldsBoundedRecords(t *testing.T) {
	x := newWaitingIndex()
	base := time.Now()
	for i := range maxHeldRecords + 1 {
		at := base.Add(-time.Duration(i) * time.Millisecond) // added latest first
		r := &record{ID: newID(), RunAt: at}
		x.add(&entry{key: string(waitingKey(at, r.ID)), at: at, id: r.ID, r: r})
	}
	due := x.takeDue(base, maxHeldRecords+1)
	if len(due) != maxHeldRecords+1 {
		t.Fatalf("%d due, want %d", len(due), maxHeldRecords+1)
	}
	for i := 1; i < len(due); i++ {
		if due[i].at.Before(due[i-1].at) {
			t.Fatalf("entry %d runs before entry %d", i, i-1)
		}
	}
	if due[0].r != nil {
		t.Fatal("the entry added beyond the bound holds its record")
	}
	if due[len(due)-1].r == nil {
		t.Fatal("the first entry added does not hold its record")
	}
}

package badgerkv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
)

// TestSyncerWaitsForAPassStartedAfterTheCommit: a commit counted while a
// pass runs is not covered by it; its waiter returns only after the next
// pass, and a pass covers every commit counted before it started.
func TestSyncerWaitsForAPassStartedAfterTheCommit(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	s := newSyncer(func() error {
		started <- struct{}{}
		<-release
		return nil
	}, defaultSyncPace)
	defer s.close()
	ctx := context.Background()
	first := s.committedOne()
	<-started // the pass for first runs now
	second, third := s.committedOne(), s.committedOne()
	done := make(chan error, 2)
	go func() { done <- s.wait(ctx, second) }()
	go func() { done <- s.wait(ctx, third) }()
	release <- struct{}{} // first's pass ends
	if err := s.wait(ctx, first); err != nil {
		t.Fatalf("waiting for the first commit: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("a commit counted during the pass was reported synced by it (%v)", err)
	case <-started: // the next pass, for both
	}
	release <- struct{}{}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("waiting: %v", err)
		}
	}
	if n := s.passes.Load(); n != 2 {
		t.Fatalf("%d passes for 3 commits, want 2", n)
	}
}

// TestUpdateSyncsDeferredDoesNotWait: on disk, while a sync pass is held
// up, UpdateDeferred returns and its write is visible, Update waits for
// the pass, and so does Flush.
func TestUpdateSyncsDeferredDoesNotWait(t *testing.T) {
	kv, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	release := make(chan struct{})
	kv.syncer.mu.Lock()
	orig := kv.syncer.syncFn
	kv.syncer.syncFn = func() error { <-release; return orig() }
	kv.syncer.mu.Unlock()
	ctx := context.Background()
	if err := kv.UpdateDeferred(ctx, set("deferred")); err != nil {
		t.Fatal(err)
	}
	if err := kv.View(ctx, func(tx store.Txn) error { _, err := tx.Get([]byte("deferred")); return err }); err != nil {
		t.Fatalf("the deferred write is not visible: %v", err)
	}
	synced := make(chan error, 1)
	go func() { synced <- kv.Update(ctx, set("synced")) }()
	flushed := make(chan error, 1)
	go func() { flushed <- kv.Flush(ctx) }()
	select {
	case err := <-synced:
		t.Fatalf("Update returned (%v) while the sync was held", err)
	case err := <-flushed:
		t.Fatalf("Flush returned (%v) while the sync was held", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	// A transaction that wrote nothing has nothing to wait for.
	before := kv.syncer.passes.Load()
	if err := kv.Update(ctx, func(store.Txn) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if kv.syncer.passes.Load() != before {
		t.Fatal("an Update that wrote nothing ran a sync pass")
	}
}

// set is a transaction that sets k.
func set(k string) func(store.Txn) error {
	return func(tx store.Txn) error { return tx.Set([]byte(k), []byte("v"), 0) }
}

// TestSyncRotatedFindsNewLogs: a WAL or value log that appeared since the
// previous pass makes the pass sync the logs.
func TestSyncRotatedFindsNewLogs(t *testing.T) {
	dir := t.TempDir()
	touch := func(n string) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	touch("00001.mem")
	touch("000001.vlog")
	l := &logFiles{dir: dir}
	if err := l.syncRotated(); err != nil {
		t.Fatal(err)
	}
	touch("00002.mem")
	if err := l.syncRotated(); err != nil {
		t.Fatal(err)
	}
	if len(l.seen) != 3 {
		t.Fatalf("seen %v, want the 3 logs", l.seen)
	}
	// A log gone between the listing and its sync was flushed: no error.
	if err := fsyncFile(filepath.Join(dir, "00009.mem")); err != nil {
		t.Fatalf("syncing a vanished log: %v", err)
	}
}

// TestSyncerCloseSyncsWhatWasCounted: a commit counted before close is
// synced by a last pass, and its waiter gets no error.
func TestSyncerCloseSyncsWhatWasCounted(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	s := newSyncer(func() error {
		started <- struct{}{}
		<-release
		return nil
	}, defaultSyncPace)
	s.committedOne()
	<-started
	n := s.committedOne() // after the running pass began
	waited := make(chan error, 1)
	go func() { waited <- s.wait(context.Background(), n) }()
	closed := make(chan struct{})
	go func() { s.close(); close(closed) }()
	release <- struct{}{}
	<-started // the last pass, for n
	release <- struct{}{}
	if err := <-waited; err != nil {
		t.Fatalf("a commit counted before close: %v", err)
	}
	<-closed
	if err := s.wait(context.Background(), n+1); err != errClosedUnsynced {
		t.Fatalf("waiting after close: %v, want errClosedUnsynced", err)
	}
}

// TestSyncerPacesDeferredCommits: with nobody waiting, a pass starts at
// most once per pace; a waiter, or close, starts it at once.
func TestSyncerPacesDeferredCommits(t *testing.T) {
	synced := make(chan struct{}, 8)
	held := make(chan chan time.Time)
	s := startSyncer(func() error { synced <- struct{}{}; return nil }, time.Hour,
		func(time.Duration) <-chan time.Time {
			c := make(chan time.Time, 1)
			held <- c
			return c
		})
	ctx := context.Background()
	s.committedOne()
	<-synced // the first pass is not held: none began within the pace
	s.committedOne()
	release := <-held // the second is
	if n := s.passes.Load(); n != 1 {
		t.Fatalf("%d passes while the second was held, want 1", n)
	}
	release <- time.Now()
	<-synced

	// A waiter does not wait out the pace: Update is durable on return.
	n := s.committedOne()
	<-held // never released
	if err := s.wait(ctx, n); err != nil {
		t.Fatalf("waiting for a commit held by the pace: %v", err)
	}
	<-synced

	// Nor does close: a deferred commit is synced before the loop ends.
	n = s.committedOne()
	<-held
	s.close()
	<-synced
	if err := s.wait(ctx, n); err != nil {
		t.Fatalf("a deferred commit counted before close: %v", err)
	}
	if got := s.passes.Load(); got != 4 {
		t.Fatalf("%d passes, want 4", got)
	}
}

// TestUpdateDurableWhileDeferredArePaced: on disk, with deferred commits
// held back by the pace, Update and Flush return only once a pass covered
// their commits, and do not wait the pace out.
func TestUpdateDurableWhileDeferredArePaced(t *testing.T) {
	kv, _ := openTestKV(t)
	s := kv.syncer
	s.mu.Lock()
	s.pace = time.Hour
	s.mu.Unlock()
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if err := kv.UpdateDeferred(ctx, set(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Update(ctx, set("d")); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	synced, committed := s.synced, s.committed
	s.mu.Unlock()
	if synced != committed {
		t.Fatalf("Update returned with commits %d..%d unsynced", synced+1, committed)
	}
	if err := kv.UpdateDeferred(ctx, set("e")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	synced, committed = s.synced, s.committed
	s.mu.Unlock()
	if synced != committed {
		t.Fatal("Flush returned with a deferred commit unsynced")
	}
}

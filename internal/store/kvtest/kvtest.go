// Package kvtest is the conformance suite of the [store.KV] contract. Every
// implementation (Badger, PostgreSQL) runs the same rules through [Run], so
// the resource layer can rely on them whatever the storage:
//
//   - snapshot reads: a View sees the state of one instant, whatever commits
//     meanwhile;
//   - read-your-writes: Get and Scan inside a transaction see its own Sets
//     and Deletes, also from a Scan callback;
//   - Update runs fn again on a serialization conflict, so concurrent
//     read-modify-writes never lose an update, and an error wrapping
//     [store.ErrConflict] ends a conflict that does not go away;
//   - an Update whose fn fails writes nothing, and a nil Update is durable
//     (it survives a close and reopen);
//   - a KV that commits without waiting for the disk
//     ([store.DeferredUpdater]) makes such a commit visible at once and
//     durable once Flush returns, and its deferred commits are isolated
//     and retried like Update's;
//   - a TTL makes a key invisible to Get and Scan as soon as it expires;
//   - Scan is ordered (ascending or descending), bounded by its prefix
//     (also a prefix of 0xff bytes, which has no successor), stops on
//     [store.ErrStopScan], returns other callback errors, and hands fn
//     copies it may keep;
//   - Get returns copies; Delete of a missing key is not an error;
//   - a canceled context is refused;
//   - a KV that reads single keys outside a transaction
//     ([store.PointReader]) answers as a View would.
//
// It is imported by tests only:
//
//	func TestConformance(t *testing.T) {
//		kvtest.Run(t, kvtest.Target{Open: openMyKV, Reopen: reopenMyKV})
//	}
package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
)

// Target is the implementation under test.
type Target struct {
	// Open returns a new, empty KV for t and closes it when t ends. Each
	// call must give independent storage: subtests run in parallel.
	Open func(t *testing.T) store.KV
	// Reopen closes kv (opened by Open for the same t) and opens the same
	// storage again, as a restarted process would; the result is closed
	// when t ends. Nil skips the durability rule.
	Reopen func(t *testing.T, kv store.KV) store.KV
}

// expiryWait bounds how long an expiring key may stay visible after its TTL
// (second granularity: a 1 s TTL may run until the next full second, and
// a loaded machine may be late).
const expiryWait = 10 * time.Second

// Run runs every rule of the contract against target, each as a parallel
// subtest on its own KV.
func Run(t *testing.T, target Target) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(*testing.T, Target)
	}{
		{"GetMissingKey", testGetMissingKey},
		{"GetReturnsCopies", testGetReturnsCopies},
		{"DeleteMissingKey", testDeleteMissingKey},
		{"ReadYourWrites", testReadYourWrites},
		{"FailedUpdateWritesNothing", testFailedUpdateWritesNothing},
		{"SnapshotReads", testSnapshotReads},
		{"ConflictRerunsFn", testConflictRerunsFn},
		{"ConcurrentIncrementsLoseNothing", testConcurrentIncrements},
		{"PersistentConflictIsErrConflict", testPersistentConflict},
		{"NilUpdateIsDurable", testDurable},
		{"DeferredUpdate", testDeferredUpdate},
		{"TTLExpiryIsImmediate", testTTLExpiry},
		{"SetReplacesTTL", testSetReplacesTTL},
		{"Scan", testScan},
		{"ScanRetainedCopiesStayValid", testScanRetainedCopies},
		{"ScanCallbackUsesTxn", testScanCallbackUsesTxn},
		{"CanceledContext", testCanceledContext},
		{"PointReadAnswersAsView", testPointRead},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, target)
		})
	}
}

func set(t *testing.T, kv store.KV, key, value string, ttl time.Duration) {
	t.Helper()
	err := kv.Update(context.Background(), func(tx store.Txn) error {
		return tx.Set([]byte(key), []byte(value), ttl)
	})
	if err != nil {
		t.Fatalf("setting %q: %v", key, err)
	}
}

// get reads key in a View; ok is false for ErrNotFound.
func get(t *testing.T, kv store.KV, key string) (value string, ok bool) {
	t.Helper()
	var v []byte
	err := kv.View(context.Background(), func(tx store.Txn) error {
		var err error
		v, err = tx.Get([]byte(key))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatalf("getting %q: %v", key, err)
	}
	return string(v), true
}

// scanKeys returns the keys under prefix, read in a View.
func scanKeys(t *testing.T, kv store.KV, prefix string, reverse bool) []string {
	t.Helper()
	var got []string
	err := kv.View(context.Background(), func(tx store.Txn) error {
		got = nil
		return tx.Scan([]byte(prefix), reverse, func(k, _ []byte) error {
			got = append(got, string(k))
			return nil
		})
	})
	if err != nil {
		t.Fatalf("scanning %q: %v", prefix, err)
	}
	return got
}

func testGetMissingKey(t *testing.T, target Target) {
	kv := target.Open(t)
	err := kv.View(context.Background(), func(tx store.Txn) error {
		_, err := tx.Get([]byte("nope"))
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of a missing key = %v, want ErrNotFound", err)
	}
}

func testGetReturnsCopies(t *testing.T, target Target) {
	kv := target.Open(t)
	set(t, kv, "k", "value", 0)
	err := kv.Update(context.Background(), func(tx store.Txn) error {
		v, err := tx.Get([]byte("k"))
		if err != nil {
			return err
		}
		copy(v, "XXXXX")
		again, err := tx.Get([]byte("k"))
		if err != nil {
			return err
		}
		if string(again) != "value" {
			t.Errorf("after changing the returned slice, Get = %q", again)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, kv, "k"); v != "value" {
		t.Fatalf("stored value = %q after changing a returned slice", v)
	}
}

func testDeleteMissingKey(t *testing.T, target Target) {
	kv := target.Open(t)
	err := kv.Update(context.Background(), func(tx store.Txn) error {
		return tx.Delete([]byte("never-written"))
	})
	if err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
}

func testReadYourWrites(t *testing.T, target Target) {
	kv := target.Open(t)
	set(t, kv, "p/old", "old", 0)
	set(t, kv, "p/gone", "gone", 0)
	err := kv.Update(context.Background(), func(tx store.Txn) error {
		if err := tx.Set([]byte("p/new"), []byte("new"), 0); err != nil {
			return err
		}
		if err := tx.Set([]byte("p/old"), []byte("changed"), 0); err != nil {
			return err
		}
		if err := tx.Delete([]byte("p/gone")); err != nil {
			return err
		}
		if v, err := tx.Get([]byte("p/new")); err != nil || string(v) != "new" {
			t.Errorf("Get of a key set in the transaction = %q, %v", v, err)
		}
		if v, err := tx.Get([]byte("p/old")); err != nil || string(v) != "changed" {
			t.Errorf("Get of a key changed in the transaction = %q, %v", v, err)
		}
		if _, err := tx.Get([]byte("p/gone")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get of a key deleted in the transaction = %v, want ErrNotFound", err)
		}
		var got []string
		err := tx.Scan([]byte("p/"), false, func(k, v []byte) error {
			got = append(got, string(k)+"="+string(v))
			return nil
		})
		if want := []string{"p/new=new", "p/old=changed"}; !slices.Equal(got, want) {
			t.Errorf("Scan in the transaction = %q, want %q", got, want)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := scanKeys(t, kv, "p/", false), []string{"p/new", "p/old"}; !slices.Equal(got, want) {
		t.Fatalf("after commit, keys = %q, want %q", got, want)
	}
}

func testFailedUpdateWritesNothing(t *testing.T, target Target) {
	kv := target.Open(t)
	set(t, kv, "kept", "v1", 0)
	boom := errors.New("boom")
	err := kv.Update(context.Background(), func(tx store.Txn) error {
		if err := tx.Set([]byte("kept"), []byte("v2"), 0); err != nil {
			return err
		}
		if err := tx.Set([]byte("new"), []byte("v"), 0); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want fn's error", err)
	}
	if v, _ := get(t, kv, "kept"); v != "v1" {
		t.Errorf("a failed Update changed a key to %q", v)
	}
	if _, ok := get(t, kv, "new"); ok {
		t.Error("a failed Update created a key")
	}
}

// testSnapshotReads: a View keeps reading the state it started with while a
// write commits in the middle of it.
func testSnapshotReads(t *testing.T, target Target) {
	kv := target.Open(t)
	ctx := context.Background()
	set(t, kv, "s/a", "v1", 0)
	err := kv.View(ctx, func(tx store.Txn) error {
		// A first read fixes the snapshot (PostgreSQL takes it at the
		// first statement).
		if v, err := tx.Get([]byte("s/a")); err != nil || string(v) != "v1" {
			t.Fatalf("first read = %q, %v", v, err)
		}
		// Commit on another goroutine: the View's goroutine may hold a
		// connection or a read lock that the writer must not need.
		done := make(chan error)
		go func() {
			done <- kv.Update(ctx, func(w store.Txn) error {
				if err := w.Set([]byte("s/a"), []byte("v2"), 0); err != nil {
					return err
				}
				if err := w.Set([]byte("s/b"), []byte("new"), 0); err != nil {
					return err
				}
				return w.Delete([]byte("s/a-sibling"))
			})
		}()
		if err := <-done; err != nil {
			t.Fatalf("concurrent Update: %v", err)
		}
		if v, err := tx.Get([]byte("s/a")); err != nil || string(v) != "v1" {
			t.Errorf("read after a concurrent commit = %q, %v; want the snapshot's v1", v, err)
		}
		if _, err := tx.Get([]byte("s/b")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a key created after the snapshot is visible: %v", err)
		}
		var got []string
		err := tx.Scan([]byte("s/"), false, func(k, v []byte) error {
			got = append(got, string(k)+"="+string(v))
			return nil
		})
		if want := []string{"s/a=v1"}; !slices.Equal(got, want) {
			t.Errorf("Scan after a concurrent commit = %q, want %q", got, want)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, kv, "s/a"); v != "v2" {
		t.Fatalf("a new View reads %q, want v2", v)
	}
}

// increment adds one to the decimal counter at key.
func increment(tx store.Txn, key string) error {
	v, err := tx.Get([]byte(key))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	n := 0
	if len(v) > 0 {
		if _, err := fmt.Sscan(string(v), &n); err != nil {
			return fmt.Errorf("counter %q: %w", v, err)
		}
	}
	return tx.Set([]byte(key), []byte(fmt.Sprint(n+1)), 0)
}

func counter(t *testing.T, kv store.KV, key string) int {
	t.Helper()
	v, ok := get(t, kv, key)
	if !ok {
		return 0
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil {
		t.Fatalf("counter %q: %v", v, err)
	}
	return n
}

// testConflictRerunsFn forces the race deterministically: A reads the
// counter, B increments and commits, then A writes. A's first attempt must
// fail to commit and fn run again on the new value.
func testConflictRerunsFn(t *testing.T, target Target) {
	for _, existing := range []bool{true, false} {
		t.Run(fmt.Sprintf("key exists %v", existing), func(t *testing.T) {
			kv := target.Open(t)
			ctx := context.Background()
			if existing {
				set(t, kv, "c", "10", 0)
			}
			var attempts atomic.Int32
			err := kv.Update(ctx, func(tx store.Txn) error {
				v, err := tx.Get([]byte("c"))
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
				if attempts.Add(1) == 1 {
					done := make(chan error)
					go func() { done <- kv.Update(ctx, func(b store.Txn) error { return increment(b, "c") }) }()
					if err := <-done; err != nil {
						return fmt.Errorf("concurrent increment: %w", err)
					}
				}
				n := 0
				if len(v) > 0 {
					if _, err := fmt.Sscan(string(v), &n); err != nil {
						return err
					}
				}
				return tx.Set([]byte("c"), []byte(fmt.Sprint(n+1)), 0)
			})
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			want := 2
			if existing {
				want = 12
			}
			if got := counter(t, kv, "c"); got != want {
				t.Fatalf("counter = %d, want %d: an increment was lost", got, want)
			}
			if n := attempts.Load(); n < 2 {
				t.Fatalf("fn ran %d time(s); the conflicting attempt must be run again", n)
			}
		})
	}
}

// testConcurrentIncrements: many goroutines increment one counter; every
// Update that returned nil is counted, and only ErrConflict may be
// returned otherwise.
func testConcurrentIncrements(t *testing.T, target Target) {
	kv := target.Open(t)
	ctx := context.Background()
	const workers, rounds = 8, 5
	var wg sync.WaitGroup
	var ok, conflicts atomic.Int32
	errs := make(chan error, workers*rounds)
	for range workers {
		wg.Go(func() {
			for range rounds {
				err := kv.Update(ctx, func(tx store.Txn) error { return increment(tx, "n") })
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, store.ErrConflict):
					conflicts.Add(1)
				default:
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Update: %v", err)
	}
	if got := counter(t, kv, "n"); got != int(ok.Load()) {
		t.Fatalf("counter = %d after %d successful increments (%d conflicts)", got, ok.Load(), conflicts.Load())
	}
	if ok.Load() == 0 {
		t.Fatal("no increment succeeded")
	}
}

// testPersistentConflict: a conflict on every attempt ends in an error
// wrapping ErrConflict after a bounded number of attempts, and writes
// nothing of fn.
func testPersistentConflict(t *testing.T, target Target) {
	kv := target.Open(t)
	ctx := context.Background()
	set(t, kv, "hot", "0", 0)
	var attempts atomic.Int32
	err := kv.Update(ctx, func(tx store.Txn) error {
		attempts.Add(1)
		if _, err := tx.Get([]byte("hot")); err != nil {
			return err
		}
		done := make(chan error)
		go func() { done <- kv.Update(ctx, func(b store.Txn) error { return increment(b, "hot") }) }()
		if err := <-done; err != nil {
			return fmt.Errorf("concurrent increment: %w", err)
		}
		if err := tx.Set([]byte("loser"), []byte("x"), 0); err != nil {
			return err
		}
		return tx.Set([]byte("hot"), []byte("lost"), 0)
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Update = %v, want an error wrapping ErrConflict", err)
	}
	n := int(attempts.Load())
	if n < 2 || n > 100 {
		t.Fatalf("fn ran %d times; want a bounded number of retries", n)
	}
	if got := counter(t, kv, "hot"); got != n {
		t.Fatalf("hot = %d, want the %d concurrent increments", got, n)
	}
	if _, ok := get(t, kv, "loser"); ok {
		t.Fatal("the conflicting transaction's write was committed")
	}
}

func testDurable(t *testing.T, target Target) {
	if target.Reopen == nil {
		t.Skip("the implementation cannot be reopened")
	}
	kv := target.Open(t)
	set(t, kv, "durable", "yes", 0)
	set(t, kv, "expiring", "later", time.Hour)
	kv = target.Reopen(t, kv)
	if v, ok := get(t, kv, "durable"); v != "yes" {
		t.Fatalf("after reopening, durable = %q (found %v)", v, ok)
	}
	if v, ok := get(t, kv, "expiring"); v != "later" {
		t.Fatalf("after reopening, a key with an hour to live = %q (found %v)", v, ok)
	}
}

// testDeferredUpdate: a deferred commit is seen by the next View at once,
// a failed one writes nothing, concurrent deferred read-modify-writes lose
// nothing, and after Flush the commits survive a reopen.
func testDeferredUpdate(t *testing.T, target Target) {
	kv := target.Open(t)
	du, ok := kv.(store.DeferredUpdater)
	if !ok {
		t.Skip("the implementation has no deferred commits")
	}
	ctx := context.Background()
	if err := du.UpdateDeferred(ctx, func(tx store.Txn) error {
		return tx.Set([]byte("deferred"), []byte("yes"), 0)
	}); err != nil {
		t.Fatalf("UpdateDeferred: %v", err)
	}
	if v, ok := get(t, kv, "deferred"); v != "yes" {
		t.Fatalf("right after UpdateDeferred, deferred = %q (found %v)", v, ok)
	}
	boom := errors.New("boom")
	if err := du.UpdateDeferred(ctx, func(tx store.Txn) error {
		if err := tx.Set([]byte("failed"), []byte("x"), 0); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("a failing UpdateDeferred returned %v, want its error", err)
	}
	if _, ok := get(t, kv, "failed"); ok {
		t.Fatal("a failed UpdateDeferred wrote its key")
	}
	const workers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				errs <- du.UpdateDeferred(ctx, func(tx store.Txn) error { return increment(tx, "count") })
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a deferred increment: %v", err)
		}
	}
	if n := counter(t, kv, "count"); n != workers*each {
		t.Fatalf("after %d deferred increments the counter is %d", workers*each, n)
	}
	if err := du.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if target.Reopen == nil {
		return
	}
	kv = target.Reopen(t, kv)
	if v, ok := get(t, kv, "deferred"); v != "yes" {
		t.Fatalf("after Flush and a reopen, deferred = %q (found %v)", v, ok)
	}
	if n := counter(t, kv, "count"); n != workers*each {
		t.Fatalf("after Flush and a reopen, the counter is %d", n)
	}
}

// testTTLExpiry: an expired key is gone for Get and Scan at once, while
// keys without a TTL or with a long one stay.
func testTTLExpiry(t *testing.T, target Target) {
	kv := target.Open(t)
	ctx := context.Background()
	set(t, kv, "t/short", "s", time.Second)
	set(t, kv, "t/long", "l", time.Hour)
	set(t, kv, "t/forever", "f", 0)
	if _, ok := get(t, kv, "t/short"); !ok {
		t.Fatal("a key with a 1 s TTL is not visible right after its write")
	}
	deadline := time.Now().Add(expiryWait)
	for {
		var gotErr error
		var keys []string
		err := kv.View(ctx, func(tx store.Txn) error {
			_, gotErr = tx.Get([]byte("t/short"))
			keys = nil
			return tx.Scan([]byte("t/"), false, func(k, _ []byte) error {
				keys = append(keys, string(k))
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if errors.Is(gotErr, store.ErrNotFound) {
			// Expired for Get: it must be expired for Scan in the same
			// transaction too.
			if want := []string{"t/forever", "t/long"}; !slices.Equal(keys, want) {
				t.Fatalf("Scan after expiry = %q, want %q", keys, want)
			}
			break
		}
		if gotErr != nil {
			t.Fatal(gotErr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("a key with a 1 s TTL still visible after %v", expiryWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Expired for reads inside an Update as well.
	err := kv.Update(ctx, func(tx store.Txn) error {
		if _, err := tx.Get([]byte("t/short")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get in an Update of an expired key = %v, want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testSetReplacesTTL: a Set without TTL on an expiring key makes it
// permanent, and a Set with a TTL on a permanent key makes it expire.
func testSetReplacesTTL(t *testing.T, target Target) {
	kv := target.Open(t)
	set(t, kv, "a", "expiring", time.Second)
	set(t, kv, "a", "permanent", 0)
	set(t, kv, "b", "permanent", 0)
	set(t, kv, "b", "expiring", time.Second)
	deadline := time.Now().Add(expiryWait)
	for {
		_, bOK := get(t, kv, "b")
		if !bOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a key given a 1 s TTL by a second Set still visible after %v", expiryWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// b's TTL was set after a's first one, so a's old expiry has passed
	// too.
	if v, ok := get(t, kv, "a"); v != "permanent" {
		t.Fatalf("a Set without TTL kept the old TTL: a = %q (found %v)", v, ok)
	}
}

// scanFixture are keys chosen for byte order: '/' < '0' < 0xff, keys that
// are prefixes of others, bytes above 0x7f and NUL.
var scanFixture = []string{
	"a/1", "a/2", "a/3", "a0", "a\xff", "a\xff\x01", "a\x00", "b/1",
	"\xff\xff/1", "\xff\xff", "\xff\xff\xff", "\xfe", "\x80", "\x00",
}

func testScan(t *testing.T, target Target) {
	kv := target.Open(t)
	ctx := context.Background()
	err := kv.Update(ctx, func(tx store.Txn) error {
		for _, k := range scanFixture {
			if err := tx.Set([]byte(k), []byte("v-"+k), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	all := slices.Clone(scanFixture)
	slices.Sort(all) // Go compares strings bytewise, as the contract orders keys
	tests := []struct {
		name    string
		prefix  string
		reverse bool
		stopAt  int // stop after this many keys; 0 = never
		want    []string
	}{
		{name: "forward", prefix: "a/", want: []string{"a/1", "a/2", "a/3"}},
		{name: "reverse", prefix: "a/", reverse: true, want: []string{"a/3", "a/2", "a/1"}},
		{name: "prefix that is a key", prefix: "a", want: []string{"a\x00", "a/1", "a/2", "a/3", "a0", "a\xff", "a\xff\x01"}},
		{name: "reverse skips the successor key", prefix: "a", reverse: true, want: []string{"a\xff\x01", "a\xff", "a0", "a/3", "a/2", "a/1", "a\x00"}},
		{name: "0xff ending prefix", prefix: "a\xff", want: []string{"a\xff", "a\xff\x01"}},
		{name: "reverse with 0xff ending prefix", prefix: "a\xff", reverse: true, want: []string{"a\xff\x01", "a\xff"}},
		{name: "all-0xff prefix", prefix: "\xff\xff", want: []string{"\xff\xff", "\xff\xff/1", "\xff\xff\xff"}},
		{name: "reverse with all-0xff prefix", prefix: "\xff\xff", reverse: true, want: []string{"\xff\xff\xff", "\xff\xff/1", "\xff\xff"}},
		{name: "single 0xff prefix", prefix: "\xff", want: []string{"\xff\xff", "\xff\xff/1", "\xff\xff\xff"}},
		{name: "NUL prefix", prefix: "\x00", want: []string{"\x00"}},
		{name: "empty prefix is everything", prefix: "", want: all},
		{name: "empty prefix reversed", prefix: "", reverse: true, want: reversed(all)},
		{name: "stop early", prefix: "a/", stopAt: 2, want: []string{"a/1", "a/2"}},
		{name: "stop early reversed", prefix: "a/", reverse: true, stopAt: 1, want: []string{"a/3"}},
		{name: "no match", prefix: "c", want: nil},
		{name: "no match reversed", prefix: "c", reverse: true, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := kv.View(ctx, func(tx store.Txn) error {
				got = nil
				return tx.Scan([]byte(tc.prefix), tc.reverse, func(k, v []byte) error {
					if string(v) != "v-"+string(k) {
						t.Errorf("value of %q = %q", k, v)
					}
					got = append(got, string(k))
					if len(got) == tc.stopAt {
						return store.ErrStopScan
					}
					return nil
				})
			})
			if err != nil {
				t.Fatalf("Scan: %v", err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Scan = %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("callback error is returned", func(t *testing.T) {
		boom := errors.New("boom")
		calls := 0
		err := kv.View(ctx, func(tx store.Txn) error {
			calls = 0
			return tx.Scan([]byte("a/"), false, func(_, _ []byte) error { calls++; return boom })
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Scan = %v, want the callback's error", err)
		}
		if calls != 1 {
			t.Fatalf("callback ran %d times after returning an error", calls)
		}
	})
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// testScanRetainedCopies: keys and values handed to fn may be kept after fn
// returns, across many entries (an implementation reusing a buffer would
// overwrite earlier ones).
func testScanRetainedCopies(t *testing.T, target Target) {
	kv := target.Open(t)
	ctx := context.Background()
	const n = 600 // more than one page of any batching implementation
	err := kv.Update(ctx, func(tx store.Txn) error {
		for i := range n {
			if err := tx.Set(fmt.Appendf(nil, "r/%04d", i), bytes.Repeat([]byte{byte('a' + i%26)}, 1+i%700), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, reverse := range []bool{false, true} {
		var keys, values [][]byte
		err := kv.View(ctx, func(tx store.Txn) error {
			keys, values = nil, nil
			return tx.Scan([]byte("r/"), reverse, func(k, v []byte) error {
				keys = append(keys, k)
				values = append(values, v)
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != n {
			t.Fatalf("reverse=%v: scanned %d keys, want %d", reverse, len(keys), n)
		}
		for j := range keys {
			i := j
			if reverse {
				i = n - 1 - j
			}
			if want := fmt.Sprintf("r/%04d", i); string(keys[j]) != want {
				t.Fatalf("reverse=%v: retained key %d = %q, want %q", reverse, j, keys[j], want)
			}
			if want := bytes.Repeat([]byte{byte('a' + i%26)}, 1+i%700); !bytes.Equal(values[j], want) {
				t.Fatalf("reverse=%v: retained value of %q changed", reverse, keys[j])
			}
		}
	}
}

// testScanCallbackUsesTxn: fn may read and write through the same
// transaction while the scan runs (the resource layer reads the record an
// index key points at from inside the scan).
func testScanCallbackUsesTxn(t *testing.T, target Target) {
	kv := target.Open(t)
	ctx := context.Background()
	const n = 300
	err := kv.Update(ctx, func(tx store.Txn) error {
		for i := range n {
			id := fmt.Sprintf("%04d", i)
			if err := tx.Set([]byte("idx/"+id), nil, 0); err != nil {
				return err
			}
			if err := tx.Set([]byte("rec/"+id), []byte("record "+id), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = kv.Update(ctx, func(tx store.Txn) error {
		seen := 0
		err := tx.Scan([]byte("idx/"), false, func(k, v []byte) error {
			if len(v) != 0 {
				t.Errorf("empty value of %q read back as %q", k, v)
			}
			id := string(k[len("idx/"):])
			rec, err := tx.Get([]byte("rec/" + id))
			if err != nil {
				return err
			}
			if string(rec) != "record "+id {
				t.Errorf("record %s = %q", id, rec)
			}
			if err := tx.Set([]byte("copy/"+id), rec, 0); err != nil {
				return err
			}
			seen++
			return tx.Delete([]byte("rec/" + id))
		})
		if seen != n {
			t.Errorf("scan visited %d keys, want %d", seen, n)
		}
		return err
	})
	if err != nil {
		t.Fatalf("Update with reads and writes inside Scan: %v", err)
	}
	if got := len(scanKeys(t, kv, "copy/", false)); got != n {
		t.Fatalf("%d keys written from inside the scan, want %d", got, n)
	}
	if got := scanKeys(t, kv, "rec/", false); len(got) != 0 {
		t.Fatalf("%d keys left that were deleted from inside the scan", len(got))
	}
}

func testCanceledContext(t *testing.T, target Target) {
	kv := target.Open(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	if err := kv.Update(ctx, func(store.Txn) error { ran = true; return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Update with a canceled context = %v, want context.Canceled", err)
	}
	if err := kv.View(ctx, func(store.Txn) error { ran = true; return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("View with a canceled context = %v, want context.Canceled", err)
	}
	if ran {
		t.Error("fn ran with a canceled context")
	}
}

func testPointRead(t *testing.T, target Target) {
	kv := target.Open(t)
	p, ok := kv.(store.PointReader)
	if !ok {
		t.Skip("the KV has no single-key read")
	}
	ctx := context.Background()
	if _, err := p.ReadKey(ctx, []byte("nope")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ReadKey of a missing key = %v, want ErrNotFound", err)
	}
	set(t, kv, "k", "value", 0)
	set(t, kv, "empty", "", 0)
	set(t, kv, "short", "gone soon", time.Second)
	v, err := p.ReadKey(ctx, []byte("k"))
	if err != nil || string(v) != "value" {
		t.Fatalf("ReadKey(k) = %q, %v", v, err)
	}
	v[0] = 'X' // a copy: the stored value is unchanged
	if v, err := p.ReadKey(ctx, []byte("k")); err != nil || string(v) != "value" {
		t.Fatalf("ReadKey(k) after changing a returned value = %q, %v", v, err)
	}
	if v, err := p.ReadKey(ctx, []byte("empty")); err != nil || v == nil || len(v) != 0 {
		t.Fatalf("ReadKey of an empty value = %#v, %v; want an empty, non-nil value", v, err)
	}
	deadline := time.Now().Add(expiryWait)
	for {
		_, err := p.ReadKey(ctx, []byte("short"))
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("ReadKey still sees a key %v after its TTL", expiryWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, ok := get(t, kv, "short"); ok {
		t.Fatal("ReadKey and View disagree on an expired key")
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.ReadKey(canceled, []byte("k")); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadKey with a canceled context = %v, want context.Canceled", err)
	}
}

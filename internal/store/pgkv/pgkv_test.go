package pgkv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/kvtest"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

func TestMain(m *testing.M) { os.Exit(pgkvtest.Main(m)) }

// dsnKV is a KV that remembers its DSN, for Reopen.
type dsnKV struct {
	*KV
	dsn string
}

func openKV(t *testing.T, o Options) *KV {
	t.Helper()
	kv, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("opening PostgreSQL storage: %v", err)
	}
	t.Cleanup(func() {
		if err := kv.Close(); err != nil {
			t.Errorf("closing: %v", err)
		}
	})
	return kv
}

// TestConformance runs the KV contract against PostgreSQL.
func TestConformance(t *testing.T) {
	t.Parallel()
	kvtest.Run(t, kvtest.Target{
		Open: func(t *testing.T) store.KV {
			dsn := pgkvtest.DSN(t)
			return &dsnKV{KV: openKV(t, Options{DSN: dsn}), dsn: dsn}
		},
		Reopen: func(t *testing.T, kv store.KV) store.KV {
			d := kv.(*dsnKV)
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			return &dsnKV{KV: openKV(t, Options{DSN: d.dsn}), dsn: d.dsn}
		},
	})
}

// TestConcurrentOpensMigrateOnce: replicas starting together on an empty
// database all open, and each migration is applied and recorded once.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	t.Parallel()
	dsn := pgkvtest.DSN(t)
	const replicas = 6
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	kvs := make([]*KV, replicas)
	start := make(chan struct{})
	for i := range replicas {
		wg.Go(func() {
			<-start
			kvs[i], errs[i] = Open(context.Background(), Options{DSN: dsn, MaxConns: 2})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
			continue
		}
		defer kvs[i].Close()
	}
	if t.Failed() {
		t.FailNow()
	}
	if n := pgkvtest.QueryInt(t, dsn, `SELECT count(*) FROM fhirgate_schema_migrations`); n != int64(len(migrations)) {
		t.Fatalf("%d migrations recorded, want %d", n, len(migrations))
	}
	// The replicas share one table.
	ctx := context.Background()
	if err := kvs[0].Update(ctx, func(tx store.Txn) error { return tx.Set([]byte("k"), []byte("v"), 0) }); err != nil {
		t.Fatal(err)
	}
	err := kvs[replicas-1].View(ctx, func(tx store.Txn) error {
		v, err := tx.Get([]byte("k"))
		if err == nil && string(v) != "v" {
			t.Errorf("other replica reads %q", v)
		}
		return err
	})
	if err != nil {
		t.Fatalf("other replica: %v", err)
	}
}

// TestNewerSchemaIsRefused: a database migrated by a newer release is not
// used by an older one.
func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	dsn := pgkvtest.DSN(t)
	kv := openKV(t, Options{DSN: dsn})
	_ = kv.Close()
	pgkvtest.Exec(t, dsn, `INSERT INTO fhirgate_schema_migrations (version) VALUES ($1)`, len(migrations)+1)
	_, err := Open(context.Background(), Options{DSN: dsn})
	if err == nil || !strings.Contains(err.Error(), "newer than this release knows") {
		t.Fatalf("Open on a newer schema = %v", err)
	}
}

// TestSweeperDeletesExpiredRowsUntilClose: expired rows leave the table in
// the background, live ones stay, and no pass runs after Close.
func TestSweeperDeletesExpiredRowsUntilClose(t *testing.T) {
	t.Parallel()
	dsn := pgkvtest.DSN(t)
	kv := openKV(t, Options{DSN: dsn, SweepInterval: 20 * time.Millisecond})
	ctx := context.Background()
	err := kv.Update(ctx, func(tx store.Txn) error {
		if err := tx.Set([]byte("short"), []byte("x"), time.Millisecond); err != nil {
			return err
		}
		if err := tx.Set([]byte("long"), []byte("x"), time.Hour); err != nil {
			return err
		}
		return tx.Set([]byte("forever"), []byte("x"), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if pgkvtest.QueryInt(t, dsn, `SELECT count(*) FROM fhirgate_kv WHERE key = 'short'`) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("expired row still in the table after %d sweeps", kv.sweeps.Load())
		}
	}
	if n := pgkvtest.QueryInt(t, dsn, `SELECT count(*) FROM fhirgate_kv`); n != 2 {
		t.Fatalf("%d rows left, want the 2 live ones", n)
	}
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	passes := kv.sweeps.Load()
	time.Sleep(100 * time.Millisecond)
	if n := kv.sweeps.Load(); n != passes {
		t.Fatalf("%d sweeps after Close", n-passes)
	}

	off := openKV(t, Options{DSN: dsn, SweepInterval: -1})
	if off.sweepEvery != 0 {
		t.Fatalf("a negative SweepInterval left the sweeper on (every %v)", off.sweepEvery)
	}
}

// TestSweepDeletesInBatches: a backlog larger than one batch is swept in
// one pass.
func TestSweepDeletesInBatches(t *testing.T) {
	t.Parallel()
	dsn := pgkvtest.DSN(t)
	kv := openKV(t, Options{DSN: dsn, SweepInterval: -1})
	pgkvtest.Exec(t, dsn, `INSERT INTO fhirgate_kv (key, value, expires_at)
SELECT convert_to('e/' || i, 'UTF8'), '', now() - interval '1 second' FROM generate_series(1, $1::int) AS i`, 2*sweepBatch+5)
	n, err := kv.sweep(context.Background())
	if err != nil || n != 2*sweepBatch+5 {
		t.Fatalf("sweep = %d, %v; want %d", n, err, 2*sweepBatch+5)
	}
}

// TestSynchronousCommitIsOn: the session setting that makes a commit wait
// for its WAL flush is on even when the role's default is off.
func TestSynchronousCommitIsOn(t *testing.T) {
	t.Parallel()
	dsn := pgkvtest.DSN(t)
	// The DSN's own setting stands in for a role or server default.
	off := dsn + "&synchronous_commit=off"
	if !strings.Contains(dsn, "?") {
		off = dsn + " synchronous_commit=off"
	}
	kv := openKV(t, Options{DSN: off})
	var got []byte
	err := kv.View(context.Background(), func(tx store.Txn) error {
		return tx.(*txn).conn.QueryRow(context.Background(), `SELECT convert_to(current_setting('synchronous_commit'), 'UTF8')`).Scan(&got)
	})
	if err != nil || string(got) != "on" {
		t.Fatalf("synchronous_commit = %q, %v; want on", got, err)
	}
}

// TestSwallowedSerializationFailureIsRetried: a serialization failure that
// fn ignores aborts the transaction all the same; Update runs fn again
// instead of reporting the later error (the failed commit, or the
// "transaction is aborted" of fn's next statement).
func TestSwallowedSerializationFailureIsRetried(t *testing.T) {
	t.Parallel()
	for _, readAfter := range []bool{false, true} {
		t.Run(map[bool]string{false: "commit", true: "next statement"}[readAfter], func(t *testing.T) {
			dsn := pgkvtest.DSN(t)
			kv := openKV(t, Options{DSN: dsn})
			ctx := context.Background()
			if err := kv.Update(ctx, func(tx store.Txn) error { return tx.Set([]byte("k"), []byte("0"), 0) }); err != nil {
				t.Fatal(err)
			}
			attempts := 0
			err := kv.Update(ctx, func(tx store.Txn) error {
				attempts++
				if _, err := tx.Get([]byte("k")); err != nil {
					return err
				}
				if attempts == 1 {
					if err := kv.Update(ctx, func(b store.Txn) error { return b.Set([]byte("k"), []byte("1"), 0) }); err != nil {
						return err
					}
				}
				_ = tx.Set([]byte("k"), []byte("2"), 0) // error ignored on purpose
				if readAfter {
					_, err := tx.Get([]byte("k"))
					return err
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Update = %v", err)
			}
			if attempts != 2 {
				t.Fatalf("fn ran %d times, want 2", attempts)
			}
		})
	}
}

// TestOpenErrors: no DSN, an unreachable server.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	if _, err := Open(context.Background(), Options{}); err == nil {
		t.Fatal("Open without a DSN succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Port 1 on loopback: nothing listens there.
	_, err := Open(ctx, Options{DSN: "postgres://u:secret-password@127.0.0.1:1/db?connect_timeout=2"})
	if err == nil {
		t.Fatal("Open on a closed port succeeded")
	}
	if strings.Contains(err.Error(), "secret-password") {
		t.Fatalf("the error shows the password: %v", err)
	}
	if errors.Is(err, store.ErrConflict) {
		t.Fatalf("a connection failure is a conflict: %v", err)
	}
}

// TestServerDownWritesAreUnwritableAndRecover: while the server cannot be
// reached, Update fails with an error wrapping ErrUnwritable (the gateway's
// 503), and it succeeds again by itself once the server is back.
func TestServerDownWritesAreUnwritableAndRecover(t *testing.T) {
	t.Parallel()
	dsn := pgkvtest.DSN(t)
	p, proxied := pgkvtest.ProxyFor(t, dsn)
	kv := openKV(t, Options{DSN: proxied + map[bool]string{true: "&", false: " "}[strings.Contains(proxied, "?")] + "connect_timeout=5", MaxConns: 2})
	ctx := context.Background()
	write := func(v string) error {
		return kv.Update(ctx, func(tx store.Txn) error { return tx.Set([]byte("k"), []byte(v), 0) })
	}
	if err := write("before"); err != nil {
		t.Fatal(err)
	}

	p.Cut()
	for _, v := range []string{"during 1", "during 2"} { // a pooled connection, then a new one
		err := write(v)
		if !errors.Is(err, store.ErrUnwritable) {
			t.Fatalf("Update with the server gone = %v, want ErrUnwritable", err)
		}
		if _, err := kv.ReadKey(ctx, []byte("k")); !errors.Is(err, store.ErrUnwritable) {
			t.Fatalf("ReadKey with the server gone = %v, want ErrUnwritable", err)
		}
	}
	p = p.Restart(t)
	if err := write("after"); err != nil {
		t.Fatalf("Update after the server came back: %v", err)
	}

	// A server that restarts between two writes leaves the pool's
	// connections dead; the next write takes a new one instead of failing.
	for i := range 3 {
		p.Cut()
		p = p.Restart(t)
		if err := write(fmt.Sprint("restart ", i)); err != nil {
			t.Fatalf("Update after a restart the pool did not see: %v", err)
		}
		p.Cut()
		p = p.Restart(t)
		if v, err := kv.ReadKey(ctx, []byte("k")); err != nil || string(v) != fmt.Sprint("restart ", i) {
			t.Fatalf("ReadKey after a restart the pool did not see = %q, %v", v, err)
		}
	}
	if err := write("after"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Update(ctx, func(tx store.Txn) error { return errors.New("fn's own error") }); err == nil || errors.Is(err, store.ErrUnwritable) {
		t.Fatalf("fn's own error became %v", err)
	}
	var got []byte
	err := kv.View(ctx, func(tx store.Txn) error {
		var err error
		got, err = tx.Get([]byte("k"))
		return err
	})
	if err != nil || string(got) != "after" {
		t.Fatalf("k = %q, %v", got, err)
	}
}

// TestHungTransactionIsBounded: a write stuck behind a lock that a stuck
// session holds gives up after Options.Timeout with ErrUnwritable (the
// gateway's 503) instead of holding its request forever; the caller's own
// cancellation stays context.Canceled.
func TestHungTransactionIsBounded(t *testing.T) {
	t.Parallel()
	dsn := pgkvtest.DSN(t)
	kv := openKV(t, Options{DSN: dsn, Timeout: 300 * time.Millisecond})
	ctx := context.Background()
	write := func(ctx context.Context) error {
		return kv.Update(ctx, func(tx store.Txn) error { return tx.Set([]byte("k"), []byte("v"), 0) })
	}
	if err := write(ctx); err != nil {
		t.Fatal(err)
	}

	stuck, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close(ctx)
	if _, err := stuck.Exec(ctx, `BEGIN; LOCK TABLE fhirgate_kv IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = write(ctx)
	// The bound the contract states: a request is not held beyond the
	// timeout (plus generous slack for a loaded machine).
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Fatalf("the hung write returned after %v", elapsed)
	}
	if !errors.Is(err, store.ErrUnwritable) {
		t.Fatalf("hung write = %v, want ErrUnwritable", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	if err := write(cctx); !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnwritable) {
		t.Fatalf("write canceled by its caller = %v, want context.Canceled", err)
	}

	if _, err := stuck.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	// The timeouts closed the pool's connections: the next write needs a
	// new one, which a loaded machine may not connect within 300 ms.
	// Recovery is what counts, so a few attempts are allowed.
	for attempt := 1; ; attempt++ {
		err := write(ctx)
		if err == nil {
			break
		}
		if attempt == 20 || !errors.Is(err, store.ErrUnwritable) {
			t.Fatalf("write after the lock was released (attempt %d): %v", attempt, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Waiting for a pooled connection counts too.
	one := openKV(t, Options{DSN: dsn, MaxConns: 1, Timeout: 300 * time.Millisecond})
	holding, release := make(chan struct{}), make(chan struct{})
	viewDone := make(chan error)
	go func() {
		viewDone <- one.View(ctx, func(store.Txn) error { close(holding); <-release; return nil })
	}()
	<-holding
	err = one.Update(ctx, func(tx store.Txn) error { return tx.Set([]byte("k"), []byte("w"), 0) })
	close(release)
	if !errors.Is(err, store.ErrUnwritable) {
		t.Fatalf("write waiting for the only connection = %v, want ErrUnwritable", err)
	}
	<-viewDone // it held its connection past the timeout, so it failed too
}

// TestUpdateDeferredCommitsAsynchronously: UpdateDeferred's transaction
// has synchronous_commit off, and only it: the connection goes back to
// the pool with the setting on.
func TestUpdateDeferredCommitsAsynchronously(t *testing.T) {
	t.Parallel()
	kv := openKV(t, Options{DSN: pgkvtest.DSN(t), MaxConns: 1})
	ctx := context.Background()
	setting := func(tx store.Txn) string {
		var got []byte
		if err := tx.(*txn).conn.QueryRow(ctx, `SELECT convert_to(current_setting('synchronous_commit'), 'UTF8')`).Scan(&got); err != nil {
			t.Fatalf("reading synchronous_commit: %v", err)
		}
		return string(got)
	}
	var inside string
	err := kv.UpdateDeferred(ctx, func(tx store.Txn) error {
		if _, err := tx.Get([]byte("k")); !errors.Is(err, store.ErrNotFound) {
			return err
		}
		inside = setting(tx)
		return tx.Set([]byte("k"), []byte("v"), 0)
	})
	if err != nil || inside != "off" {
		t.Fatalf("UpdateDeferred: synchronous_commit = %q, %v; want off", inside, err)
	}
	var after string
	err = kv.Update(ctx, func(tx store.Txn) error {
		if _, err := tx.Get([]byte("k")); err != nil {
			return err
		}
		after = setting(tx)
		return nil
	})
	if err != nil || after != "on" {
		t.Fatalf("the next Update: synchronous_commit = %q, %v; want on", after, err)
	}
}

package riverqueue

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store/pgkv"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// TestDeferredTxTurnsSynchronousCommitOff: the Deferred Enqueues'
// transaction has synchronous_commit off, and the connection goes back to
// the pool with it on.
func TestDeferredTxTurnsSynchronousCommitOff(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgkvtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tx, err := pool.BeginTx(ctx, deferredTx)
	if err != nil {
		t.Fatal(err)
	}
	var inside, after string
	if err := tx.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&inside); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if inside != "off" || after != "on" {
		t.Fatalf("synchronous_commit %q in the transaction, %q after; want off, on", inside, after)
	}
}

// statements records the SQL sent on a pool's connections.
type statements struct {
	mu  sync.Mutex
	sql []string
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sql = append(s.sql, d.SQL)
	return ctx
}

func (*statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sql := s.sql
	s.sql = nil
	return sql
}

// openTraced opens a pgkv store of maxConns connections whose statements
// are recorded, and a queue on its pool.
func openTraced(t *testing.T, maxConns int32) (*pgkv.KV, *Queue, *statements) {
	t.Helper()
	ctx := context.Background()
	kv, err := pgkv.Open(ctx, pgkv.Options{DSN: pgkvtest.DSN(t), SweepInterval: -1, MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	cfg := kv.Pool().Config()
	st := &statements{}
	cfg.ConnConfig.Tracer = st
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q, err := New(ctx, pool, pgkv.PgxTx, queue.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Stop(context.Background()) })
	return kv, q, st
}

// TestDeferredEnqueueIsOneStatement: a Deferred Enqueue sends River's
// INSERT alone, committed by itself with synchronous_commit off: no
// BEGIN, SET or COMMIT round trips.
func TestDeferredEnqueueIsOneStatement(t *testing.T) {
	ctx := context.Background()
	_, q, st := openTraced(t, 4)
	job := queue.Job{Kind: "k", Args: []byte(`{"n":1}`), Deferred: true}
	// The first Enqueue connects and prepares River's statements.
	if _, err := q.Enqueue(ctx, job); err != nil {
		t.Fatal(err)
	}
	st.take()
	res, err := q.Enqueue(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	inserts := 0
	for _, sql := range st.take() {
		word := strings.TrimRight(strings.ToLower(strings.Fields(sql)[0]), ";")
		switch {
		case strings.Contains(sql, "JobInsertFastMany"):
			inserts++
		case word == "begin" || word == "commit" || word == "set":
			t.Errorf("a Deferred Enqueue sent %q", sql)
		}
	}
	if inserts != 1 {
		t.Errorf("%d INSERTs for one Deferred Enqueue; want 1", inserts)
	}
	if info, err := q.Get(ctx, res.ID); err != nil || info.State != queue.StateAvailable {
		t.Fatalf("the Deferred job is %+v, %v; want it available", info, err)
	}
	var setting string
	if err := q.async.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&setting); err != nil {
		t.Fatal(err)
	}
	if setting != "off" {
		t.Fatalf("synchronous_commit is %q on the Deferred Enqueues' connection; want off", setting)
	}
}

// TestDeferredEnqueueNeedsNoPoolConnection: a Deferred Enqueue does not
// wait for a connection of the store's pool, which the workers share.
func TestDeferredEnqueueNeedsNoPoolConnection(t *testing.T) {
	ctx := context.Background()
	_, q, _ := openTraced(t, 2) // New migrates on two
	for range q.pool.Config().MaxConns {
		held, err := q.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release()
	}
	// The deadline only ends the test when the Enqueue does wait for the
	// held connection; it is not a measure of speed.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := q.Enqueue(wctx, queue.Job{Kind: "k", Deferred: true}); err != nil {
		t.Fatalf("a Deferred Enqueue with the pool's connections all taken: %v", err)
	}
}

// TestDeferredEnqueueAfterStop: after Stop has closed the Deferred
// Enqueues' connection, they are committed on the store's pool.
func TestDeferredEnqueueAfterStop(t *testing.T) {
	ctx := context.Background()
	_, q, _ := openTraced(t, 4)
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := q.Enqueue(ctx, queue.Job{Kind: "k", Deferred: true})
	if err != nil {
		t.Fatalf("a Deferred Enqueue after Stop: %v", err)
	}
	if _, err := q.Get(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
}

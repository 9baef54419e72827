// Package pgkv implements [store.KV] on PostgreSQL, so that several gateway
// replicas can share one store. Every rule of the KV contract holds as on
// the embedded Badger store (the same conformance suite, kvtest, runs
// against both):
//
//   - View runs in a REPEATABLE READ READ ONLY transaction: one snapshot,
//     taken at its first statement. ReadKey ([store.PointReader]) reads one
//     key as one statement, without BEGIN and COMMIT.
//   - Update runs in a SERIALIZABLE transaction. A serialization failure
//     (SQLSTATE 40001) or a deadlock (40P01) runs fn again, a bounded
//     number of times with jittered backoff; after that the error wraps
//     [store.ErrConflict]. An Update that cannot reach the server (no
//     connection, a connection lost, a server shutting down, no answer
//     within Options.Timeout) wraps [store.ErrUnwritable], which the
//     gateway answers with 503; so does a View that cannot reach it.
//   - A nil Update is durable: every connection runs with
//     synchronous_commit on, whatever the server's default
//     (UpdateDeferred turns it off for its transaction).
//   - Keys with a TTL carry expires_at; reads filter them out as soon as it
//     has passed (by the server's clock, so replicas agree), and a
//     background sweeper deletes them in batches.
//   - Scan reads `key >= prefix AND key < successor(prefix)` (no upper bound
//     for an empty or all-0xff prefix) in bytea order, which is byte order,
//     in pages, so fn may use the transaction while it runs.
//   - A transaction's writes are sent in multi-row statements (before a
//     Scan, every few thousand keys and at commit, where the last ones, the
//     announcements and COMMIT share one round trip), and the resource layer
//     prefetches the keys a batch checks ([store.Prefetcher]), so a large
//     PutAll costs a few round trips, not several per record (pending.go).
//   - Backup and Restore speak Badger's backup stream (package kvbackup),
//     so a Badger deployment's backup restores here, and back.
//   - The KV is a [store.SharedKV]: other gateways write it too.
//
// # Schema
//
// One table, fhirgate_kv (key bytea primary key, value bytea not null,
// expires_at timestamptz null), in the first schema of the connection's
// search_path. [Open] creates and migrates it, recording each applied
// version in fhirgate_schema_migrations, under a transaction-scoped
// advisory lock so that replicas starting at once apply each migration
// exactly once. A database migrated by a newer release is refused.
//
// # Change feed
//
// KV implements [store.ChangeFeed] (feed.go): a transaction that announced
// the records it wrote sends them with pg_notify before its COMMIT, and
// every KV keeps one connection LISTENing on its schema's channel,
// reconnecting with backoff and reporting "everything changed" after each
// (re)connect. The Store built on it counts other replicas' writes in its
// change counters, which its callers' caches consult.
//
// # Usage
//
//	kv, err := pgkv.Open(ctx, pgkv.Options{DSN: os.Getenv("FHIRGATE_POSTGRES_DSN")})
//	if err != nil { ... }
//	defer kv.Close()
//	s := store.New(kv, store.Options{})
//
// The package is Caddy-free; caddymodule's `fhirgate.storage.postgres`
// module opens it.
package pgkv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/store"
)

// Options configures [Open]. The zero value (plus DSN) gives the defaults.
type Options struct {
	// DSN is the PostgreSQL connection string, a URL
	// (postgres://user:password@host:5432/db?sslmode=require) or
	// key=value pairs; required. It is never logged.
	DSN string
	// MaxConns bounds the connections of the pool. 0 means
	// DefaultMaxConns.
	MaxConns int32
	// SweepInterval is how often expired keys are deleted. They are
	// invisible from the instant they expire; sweeping only gives the
	// space back. 0 means DefaultSweepInterval; negative turns the sweeper
	// off.
	SweepInterval time.Duration
	// Timeout bounds each transaction attempt, from BEGIN to COMMIT, so
	// that a hung query (a lost network path, a lock held by a stuck
	// session) cannot hold a request forever; an Update that runs out of
	// it fails with an error wrapping store.ErrUnwritable. 0 means
	// DefaultTimeout; negative means no bound beyond the caller's
	// context.
	Timeout time.Duration
	// Logger receives the sweeper's failures; nil discards them.
	Logger *zap.Logger
}

// DefaultMaxConns is the pool size when Options.MaxConns is 0.
const DefaultMaxConns = 16

// DefaultTimeout bounds a transaction attempt when Options.Timeout is 0.
// Generous: the longest legitimate transactions (a declared config's batch,
// a scan of every user) take well under a second.
const DefaultTimeout = 15 * time.Second

// DefaultSweepInterval is how often expired keys are deleted when
// Options.SweepInterval is 0.
const DefaultSweepInterval = time.Minute

// KV is the PostgreSQL [store.KV].
type KV struct {
	pool    *pgxpool.Pool
	logger  *zap.Logger
	timeout time.Duration // per transaction attempt; 0 = none

	// The sweeper, stopped by Close: cancel interrupts a running pass.
	cancel     context.CancelFunc
	loops      sync.WaitGroup
	sweepEvery time.Duration
	sweeps     atomic.Int64 // passes run, for tests

	closeOnce sync.Once

	// The change feed (feed.go): the listening connection's settings,
	// the schema's channel, this KV's id in its notifications, and who
	// hears them.
	loopCtx      context.Context
	listenConfig *pgx.ConnConfig
	channel      string
	sender       string
	feedMu       sync.Mutex
	subscribers  []func(topics []string)
	listens      atomic.Int64 // connections that reached LISTEN and flushed, for tests
	// firstListen is closed when the first connection attempt has
	// listened and flushed, or failed.
	firstListen     chan struct{}
	firstListenOnce sync.Once
}

// Open connects to PostgreSQL, creates or migrates the schema and starts
// the sweeper.
func Open(ctx context.Context, o Options) (*KV, error) {
	if o.DSN == "" {
		return nil, errors.New("opening PostgreSQL storage: a DSN is required")
	}
	k, err := open(ctx, o)
	// pgx redacts the password in the errors it makes, but not every layer
	// below it need: the DSN is the operator's secret.
	return k, redact(err, o.DSN)
}

func open(ctx context.Context, o Options) (*KV, error) {
	cfg, err := pgxpool.ParseConfig(o.DSN)
	if err != nil {
		return nil, fmt.Errorf("parsing the PostgreSQL DSN: %w", err)
	}
	cfg.MaxConns = cmp.Or(o.MaxConns, DefaultMaxConns)
	// A nil Update means durable: never let a server or role default of
	// synchronous_commit = off acknowledge a commit before its WAL is
	// flushed.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "fhirgate"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening PostgreSQL storage: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening PostgreSQL storage: reading the schema: %w", err)
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	k := &KV{
		pool:         pool,
		logger:       cmp.Or(o.Logger, zap.NewNop()),
		timeout:      max(cmp.Or(o.Timeout, DefaultTimeout), 0),
		cancel:       cancel,
		loopCtx:      loopCtx,
		listenConfig: cfg.ConnConfig,
		channel:      channelName(schema),
		sender:       newSenderID(),
		firstListen:  make(chan struct{}),
	}
	if k.sweepEvery = max(cmp.Or(o.SweepInterval, DefaultSweepInterval), 0); k.sweepEvery > 0 {
		k.loops.Add(1)
		go k.sweepLoop(loopCtx)
	}
	return k, nil
}

// maxUpdateAttempts bounds the runs of a conflicting transaction; beyond it
// the contention is pathological and the caller gets ErrConflict. It is
// higher than Badger's 10: a PostgreSQL transaction takes a round trip per
// statement, so racing writers overlap longer, and SSI also fails
// transactions that merely read an index page another one wrote (16
// writers of one project's usage counter exhausted 10 attempts,
// store's TestBotRecordUsageIsExactUnderConcurrentWriters).
const maxUpdateAttempts = 30

// maxBackoff caps the exponential backoff between attempts.
const maxBackoff = 200 * time.Millisecond

// rollbackTimeout bounds the rollback of a transaction whose context is
// done.
const rollbackTimeout = 5 * time.Second

// View runs fn in a read-only snapshot transaction.
func (k *KV) View(ctx context.Context, fn func(store.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := k.run(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, false, fn)
	return unwritable(ctx, err)
}

// unwritable wraps an error that says the server cannot be reached in
// store.ErrUnwritable, which the gateway answers with 503 and Retry-After:
// reads fail the same way as writes while PostgreSQL is down. (The
// caller's own deadline has passed only if ctx.Err is set.)
func unwritable(ctx context.Context, err error) error {
	if err != nil && ctx.Err() == nil && unreachable(err) {
		return fmt.Errorf("%w: %w", store.ErrUnwritable, err)
	}
	return err
}

// Update runs fn in a serializable transaction, running it again on
// serialization failures and deadlocks.
func (k *KV) Update(ctx context.Context, fn func(store.Txn) error) error {
	return k.update(ctx, false, fn)
}

// UpdateDeferred implements store.DeferredUpdater: the transaction
// commits with synchronous_commit off, so its COMMIT does not wait for
// the WAL flush. The server has the write at once (every session sees it,
// a crash of this process does not lose it); a crash of PostgreSQL or of
// its machine within about three times wal_writer_delay (600 ms by
// default) can.
func (k *KV) UpdateDeferred(ctx context.Context, fn func(store.Txn) error) error {
	return k.update(ctx, true, fn)
}

// Flush implements store.DeferredUpdater: it waits until PostgreSQL has
// flushed its WAL up to where it was inserting at the call.
func (k *KV) Flush(ctx context.Context) error {
	var target string
	if err := k.pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&target); err != nil {
		return fmt.Errorf("reading the WAL position: %w", err)
	}
	for {
		var done bool
		if err := k.pool.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, target).Scan(&done); err != nil {
			return fmt.Errorf("reading the WAL position: %w", err)
		}
		if done {
			return nil
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (k *KV) update(ctx context.Context, deferred bool, fn func(store.Txn) error) error {
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		retry, err := k.run(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable}, deferred, fn)
		if !retry {
			// As for a full disk under Badger. A commit cut off by the
			// connection loss or the timeout may or may not have been
			// applied.
			return unwritable(ctx, err)
		}
		if attempt == maxUpdateAttempts {
			return fmt.Errorf("%w: transaction still conflicting with concurrent writes after %d attempts: %w", store.ErrConflict, attempt, err)
		}
		// Exponential, fully jittered: the same set of racing writers
		// spreads out instead of colliding again in lockstep.
		ceiling := min(time.Millisecond<<min(attempt, 16), maxBackoff)
		backoff := time.Duration(rand.Int64N(int64(ceiling)))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// run runs fn in one transaction and commits it if fn returns nil. retry
// reports a serialization failure or deadlock anywhere in the transaction,
// even one that fn swallowed: PostgreSQL has aborted the transaction then,
// so it cannot have committed.
func (k *KV) run(ctx context.Context, opts pgx.TxOptions, deferred bool, fn func(store.Txn) error) (retry bool, err error) {
	// The caller's ctx decides what is the caller's cancellation; the
	// timeout's own expiry is reported as a store that cannot answer.
	callerCtx := ctx
	if k.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, k.timeout)
		defer cancel()
	}
	conn, err := k.pool.Acquire(ctx)
	if err != nil {
		if ctxErr := callerCtx.Err(); ctxErr != nil {
			return false, ctxErr
		}
		return false, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	t := &txn{ctx: ctx, pool: k.pool, conn: conn, opts: opts, deferred: deferred}
	defer func() {
		if t.conn != nil {
			t.conn.Release()
		}
	}()
	done := false
	defer func() {
		if !done && t.tx != nil && (t.conn == nil || t.conn.Conn().PgConn().TxStatus() != 'I') {
			// Also on a panic in fn: the connection goes back to the pool
			// clean (or is closed and dropped by it). A commit batch that
			// failed at COMMIT has ended the transaction already.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(callerCtx), rollbackTimeout)
			defer cancel()
			_ = t.tx.Rollback(rctx)
		}
	}()
	err = fn(t)
	if err != nil {
		if ctxErr := callerCtx.Err(); ctxErr != nil && !retryable(err) {
			return false, errors.Join(ctxErr, err)
		}
		return retryable(err) || retryable(t.failed), err
	}
	failed := t.failed // a failed statement fn swallowed
	committed, err := t.commit(k.channel, k.sender)
	done = committed
	if err != nil {
		cause := err
		if failed != nil {
			// The batch only says the transaction is aborted.
			cause = failed
		}
		if ctxErr := callerCtx.Err(); ctxErr != nil && !retryable(cause) {
			return false, errors.Join(ctxErr, err)
		}
		return retryable(cause), fmt.Errorf("committing a PostgreSQL transaction: %w", cause)
	}
	return false, nil
}

// retryable reports a serialization failure or a deadlock, after which the
// whole transaction may succeed when run again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "40001", // serialization_failure
		"40P01": // deadlock_detected
		return true
	}
	return false
}

// unreachable reports an error that says the server cannot take the
// transaction right now, rather than anything about the transaction: no
// connection, a connection lost, no answer within the timeout, a server
// shutting down or starting up, out of connections or disk, or a read-only
// standby.
func unreachable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection_exception
			strings.HasPrefix(pgErr.Code, "53"), // insufficient_resources
			pgErr.Code == "57P01",               // admin_shutdown
			pgErr.Code == "57P02",               // crash_shutdown
			pgErr.Code == "57P03",               // cannot_connect_now
			pgErr.Code == "25006":               // read_only_sql_transaction
			return true
		}
		return false
	}
	// net.Error covers failed dials, broken sockets and timeouts, the
	// Timeout option's context.DeadlineExceeded among them.
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, pgconn.ErrConnClosed)
}

// classify marks an error that says the server cannot be reached as
// store.ErrUnwritable.
func (k *KV) classify(err error) error {
	if unreachable(err) {
		return fmt.Errorf("%w: %w", store.ErrUnwritable, err)
	}
	return err
}

// Close stops the sweeper and closes the pool. Calling it again does
// nothing.
func (k *KV) Close() error {
	k.closeOnce.Do(func() {
		k.cancel()
		k.loops.Wait()
		k.pool.Close()
	})
	return nil
}

// SharedByProcesses reports that other gateways may write the same
// database, so the store's caches must not count on seeing every write.
func (k *KV) SharedByProcesses() bool { return true }

// Interface guards
var _ store.SharedKV = (*KV)(nil)

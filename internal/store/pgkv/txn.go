package pgkv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fhirgate/fhirgate/internal/store"
)

// txn is one transaction. failed keeps the first error PostgreSQL
// returned, which aborts the transaction whatever fn does with it.
type txn struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	conn   *pgxpool.Conn
	opts   pgx.TxOptions
	tx     pgx.Tx // begun by the first statement, nil before
	failed error
	// connErr is why conn is nil: it was lost and no other could be had.
	connErr error
	// pending holds the writes not sent yet, cache what Prefetch read
	// (pending.go).
	pending map[string]pendingWrite
	cache   map[string]cachedRead
	// topics are the changes announced to other processes at commit.
	topics map[string]struct{}
	// deferred commits without waiting for the WAL flush (UpdateDeferred).
	deferred bool
}

// stmt is one statement of a transaction; read gets its rows (nil: they
// are discarded).
type stmt struct {
	sql  string
	args []any
	read func(pgx.Rows) error
}

// query runs one statement of the transaction and hands its rows to read
// (nil: the rows are discarded).
func (t *txn) query(sql string, args []any, read func(pgx.Rows) error) error {
	return t.send(stmt{sql, args, read})
}

// send runs statements of the transaction in one round trip. The first
// statements also begin the transaction, in the same round trip (pgx's
// Batch.BeginTx), so a View that reads one key costs two round trips
// (BEGIN and SELECT, then COMMIT) instead of three, and an Update whose
// writes all go at commit one (see commit).
func (t *txn) send(stmts ...stmt) error {
	if t.conn == nil {
		return t.connErr
	}
	if t.tx != nil && len(stmts) == 1 {
		s := stmts[0]
		rows, err := t.tx.Query(t.ctx, s.sql, s.args...)
		if err != nil {
			return err
		}
		err = readRows(s.read, rows)
		rows.Close()
		if err != nil {
			return err
		}
		return rows.Err()
	}
	batch := func() *pgx.Batch {
		b := &pgx.Batch{}
		if t.tx == nil {
			b.BeginTx(t.opts)
			if t.deferred {
				// For this transaction's COMMIT only.
				b.Queue(`SET LOCAL synchronous_commit = off`)
			}
		}
		for _, s := range stmts {
			read := s.read
			b.Queue(s.sql, s.args...).Query(func(rows pgx.Rows) error { return readRows(read, rows) })
		}
		return b
	}
	if t.tx != nil {
		return t.tx.SendBatch(t.ctx, batch()).Close()
	}
	for stale := 0; ; stale++ {
		br := t.conn.SendBatch(t.ctx, batch())
		err := br.Close()
		lost := pgconn.SafeToRetry(err) || t.conn.Conn().IsClosed()
		if err == nil || !lost || t.ctx.Err() != nil || stale >= int(t.pool.Config().MaxConns) {
			t.tx = br.Tx()
			return err
		}
		// A pooled connection the server has dropped (a restart, a
		// proxy's idle timeout). The pool drops the connection on
		// release; take another rather than fail the caller. A server
		// that is really down fails to connect, which ends this.
		// Sending the batch again is safe: it begins the transaction,
		// so either nothing of it was applied, or it also ends it
		// (commit's write-only Update) and then it read nothing — sent
		// again it is the same blind writes committed a moment later.
		t.conn.Release()
		c, aerr := t.pool.Acquire(t.ctx)
		if aerr != nil {
			t.conn = nil
			t.connErr = fmt.Errorf("%w (reconnecting: %w)", err, aerr)
			return t.connErr
		}
		t.conn = c
	}
}

// readRows hands rows to read, or discards them when read is nil.
func readRows(read func(pgx.Rows) error, rows pgx.Rows) error {
	if read == nil {
		return nil
	}
	return read(rows)
}

// commitSQL ends a transaction sent in a batch.
const commitSQL = "COMMIT"

// commit sends the writes fn left unsent, the announcements and COMMIT in
// one round trip (with BEGIN too when fn ran no statement: a write-only
// Update, such as a sign-in's Login, is one round trip in all).
// committed is false when there was nothing to commit or it failed.
func (t *txn) commit(channel, sender string) (committed bool, err error) {
	stmts, _ := t.pendingStmts()
	if s, ok := t.notifyStmt(channel, sender); ok {
		stmts = append(stmts, s)
	}
	if len(stmts) == 0 {
		if t.tx == nil {
			return false, nil // fn ran no statement: there is no transaction
		}
		if err := t.tx.Commit(t.ctx); err != nil {
			return false, err
		}
		return true, nil
	}
	stmts = append(stmts, stmt{sql: commitSQL, read: func(rows pgx.Rows) error {
		for rows.Next() {
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// COMMIT of an aborted transaction rolls it back without error.
		if rows.CommandTag().String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	}})
	if err := t.send(stmts...); err != nil {
		t.fail(err)
		return false, err
	}
	return true, nil
}

func (t *txn) fail(err error) {
	if t.failed == nil {
		t.failed = err
	}
}

// live is the condition that hides expired rows. now() is the
// transaction's start time, so every read of one transaction agrees on
// what has expired.
const live = `(expires_at IS NULL OR expires_at > now())`

func (t *txn) Get(key []byte) ([]byte, error) {
	if v, err, ok := t.pendingGet(key); ok {
		return v, err
	}
	var v []byte
	found := false
	err := t.query(`SELECT value FROM fhirgate_kv WHERE key = $1 AND `+live, []any{key}, func(rows pgx.Rows) error {
		if !rows.Next() {
			return nil
		}
		found = true
		// pgx scans bytea into a new slice: the caller owns v.
		return rows.Scan(&v)
	})
	if err != nil {
		t.fail(err)
		return nil, fmt.Errorf("reading key %q: %w", key, err)
	}
	if !found {
		return nil, store.ErrNotFound
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

func (t *txn) Set(key, value []byte, ttl time.Duration) error {
	w := pendingWrite{value: append([]byte{}, value...)}
	if ttl > 0 {
		// At least a microsecond: a positive TTL must expire.
		w.ttl = max(ttl.Microseconds(), 1)
	}
	if err := t.write(key, w); err != nil {
		return fmt.Errorf("writing key %q: %w", key, err)
	}
	return nil
}

func (t *txn) Delete(key []byte) error {
	if err := t.write(key, pendingWrite{deleted: true}); err != nil {
		return fmt.Errorf("deleting key %q: %w", key, err)
	}
	return nil
}

// Scan pages: the first page is small because most scans stop early
// (lookups through an index, lists with a limit), later ones grow.
const (
	firstScanPage = 32
	maxScanPage   = 1024
)

type kvPair struct{ key, value []byte }

func (t *txn) Scan(prefix []byte, reverse bool, fn func(key, value []byte) error) error {
	upper := prefixSuccessor(prefix)
	var after []byte // the last key handed to fn
	for page := firstScanPage; ; page = min(2*page, maxScanPage) {
		// Read a whole page before calling fn: the connection is busy
		// while rows are open, and fn may use the transaction.
		pairs, err := t.scanPage(prefix, upper, after, reverse, page)
		if err != nil {
			return err
		}
		for _, p := range pairs {
			if err := fn(p.key, p.value); err != nil {
				if errors.Is(err, store.ErrStopScan) {
					return nil
				}
				return err
			}
		}
		if len(pairs) < page {
			return nil
		}
		after = pairs[len(pairs)-1].key
	}
}

func (t *txn) scanPage(prefix, upper, after []byte, reverse bool, limit int) ([]kvPair, error) {
	// The scan must see the transaction's writes, also those fn made
	// during the previous page.
	if err := t.flush(); err != nil {
		return nil, err
	}
	var q strings.Builder
	q.WriteString(`SELECT key, value FROM fhirgate_kv WHERE key >= $1 AND ` + live)
	if prefix == nil {
		prefix = []byte{} // pgx would send nil as NULL, which matches nothing
	}
	args := []any{prefix}
	if upper != nil {
		args = append(args, upper)
		fmt.Fprintf(&q, ` AND key < $%d`, len(args))
	}
	if after != nil {
		args = append(args, after)
		if reverse {
			fmt.Fprintf(&q, ` AND key < $%d`, len(args))
		} else {
			fmt.Fprintf(&q, ` AND key > $%d`, len(args))
		}
	}
	if reverse {
		q.WriteString(` ORDER BY key DESC`)
	} else {
		q.WriteString(` ORDER BY key`)
	}
	args = append(args, limit)
	fmt.Fprintf(&q, ` LIMIT $%d`, len(args))

	var pairs []kvPair
	err := t.query(q.String(), args, func(rows pgx.Rows) error {
		pairs = make([]kvPair, 0, limit)
		for rows.Next() {
			var p kvPair
			// pgx scans bytea into new slices, so fn may keep them.
			if err := rows.Scan(&p.key, &p.value); err != nil {
				return err
			}
			if p.value == nil {
				p.value = []byte{}
			}
			pairs = append(pairs, p)
		}
		return rows.Err()
	})
	if err != nil {
		t.fail(err)
		return nil, fmt.Errorf("scanning prefix %q: %w", prefix, err)
	}
	return pairs, nil
}

// prefixSuccessor returns the smallest key greater than all keys starting
// with prefix, or nil when there is none (empty or all-0xff prefix).
func prefixSuccessor(prefix []byte) []byte {
	up := append([]byte(nil), prefix...)
	for i := len(up) - 1; i >= 0; i-- {
		if up[i] < 0xff {
			up[i]++
			return up[:i+1]
		}
	}
	return nil
}

// Interface guards
var _ store.Txn = (*txn)(nil)

package riverqueue

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// autocommit hands River a connection outside any transaction as the
// pgx.Tx of InsertManyTx: each statement River sends commits on its own,
// so a group of Deferred Enqueues costs one round trip (River's INSERT of
// the group, a single statement) instead of three (BEGIN, INSERT,
// COMMIT). What River may send besides — the insert notification, a
// pg_notify at most once per fetch cooldown — is a hint that workers
// would otherwise find by polling: it need not commit with the jobs.
type autocommit struct{ c *pgx.Conn }

// errAutocommit is what Commit and Rollback return: every statement has
// already committed. River never ends a transaction it was handed.
var errAutocommit = errors.New("an autocommit connection has no transaction to end")

func (a autocommit) Begin(ctx context.Context) (pgx.Tx, error) { return a.c.Begin(ctx) }
func (autocommit) Commit(context.Context) error                { return errAutocommit }
func (autocommit) Rollback(context.Context) error              { return errAutocommit }

func (a autocommit) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return a.c.CopyFrom(ctx, table, columns, src)
}

func (a autocommit) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return a.c.SendBatch(ctx, b)
}

// LargeObjects needs a transaction; River uses none.
func (autocommit) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (a autocommit) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return a.c.Prepare(ctx, name, sql)
}

func (a autocommit) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return a.c.Exec(ctx, sql, args...)
}

func (a autocommit) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return a.c.Query(ctx, sql, args...)
}

func (a autocommit) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return a.c.QueryRow(ctx, sql, args...)
}

func (a autocommit) Conn() *pgx.Conn { return a.c }

// Interface guards
var _ pgx.Tx = autocommit{}

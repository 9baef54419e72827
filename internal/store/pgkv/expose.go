package pgkv

import (
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fhirgate/fhirgate/internal/store"
)

// Pool is the KV's connection pool, for what shares the database with the
// store: River's job queue (internal/queue/riverqueue) enqueues in the
// store's transactions and works its jobs on this pool.
func (k *KV) Pool() *pgxpool.Pool { return k.pool }

// PgxTx returns the PostgreSQL transaction behind t, a transaction of an
// Update or View of a pgkv KV, beginning it if no statement has yet: rows
// written with it commit or roll back with t. The serializable
// transaction's rules hold for them too (a conflict runs the whole Update
// again).
func PgxTx(t store.Txn) (pgx.Tx, error) {
	tt, ok := t.(*txn)
	if !ok {
		return nil, errors.New("not a PostgreSQL store transaction")
	}
	if tt.tx == nil {
		// The transaction begins with its first statement (query).
		if err := tt.query("SELECT 1", nil, nil); err != nil {
			tt.fail(err)
			return nil, err
		}
	}
	return tt.tx, nil
}

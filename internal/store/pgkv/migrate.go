package pgkv

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the schema's versions in order: migrations[i] takes the
// schema from version i to i+1. Never edit an applied one; append.
var migrations = []string{
	// 1: the key-value table. bytea compares bytewise (no collation), which
	// is the key order of the KV contract. The partial index serves the
	// sweeper.
	`CREATE TABLE fhirgate_kv (
	key        bytea PRIMARY KEY,
	value      bytea NOT NULL,
	expires_at timestamptz NULL
);
CREATE INDEX fhirgate_kv_expires_at ON fhirgate_kv (expires_at) WHERE expires_at IS NOT NULL;`,
}

// migrationLock is the advisory lock key that serializes migrations of one
// database ("fhirgate" in ASCII).
const migrationLock int64 = 0x6668697267617465

// migrate brings the schema to the newest version in one transaction. The
// transaction-scoped advisory lock makes replicas that start together wait
// for each other: the second sees the first's versions and applies nothing.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return fmt.Errorf("taking the migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS fhirgate_schema_migrations (
	version    integer PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
			return fmt.Errorf("creating the migrations table: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM fhirgate_schema_migrations`).Scan(&current); err != nil {
			return fmt.Errorf("reading the schema version: %w", err)
		}
		if current > len(migrations) {
			return fmt.Errorf("the database schema is at version %d, newer than this release knows (%d): upgrade fhirgate", current, len(migrations))
		}
		for v := current + 1; v <= len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return fmt.Errorf("applying schema migration %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO fhirgate_schema_migrations (version) VALUES ($1)`, v); err != nil {
				return fmt.Errorf("recording schema migration %d: %w", v, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrating the PostgreSQL schema: %w", err)
	}
	return nil
}

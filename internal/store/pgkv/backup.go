package pgkv

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/fhirgate/fhirgate/internal/store/kvbackup"
)

// Backup writes every live key to w as a backup stream (package kvbackup:
// Badger's format, so a Badger storage restores it too), from one snapshot;
// writers are not blocked. A key's expiry is rounded up to the second.
func (k *KV) Backup(w io.Writer) error {
	ctx := context.Background()
	err := pgx.BeginTxFunc(ctx, k.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT key, value, coalesce(ceil(extract(epoch FROM expires_at)), 0)::bigint
FROM fhirgate_kv WHERE `+live+` ORDER BY key`)
		if err != nil {
			return err
		}
		defer rows.Close()
		bw := kvbackup.NewWriter(w)
		for rows.Next() {
			var e kvbackup.Entry
			var expires int64
			if err := rows.Scan(&e.Key, &e.Value, &expires); err != nil {
				return err
			}
			e.ExpiresAt = uint64(max(expires, 0))
			if err := bw.Add(e); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return fmt.Errorf("backing up storage: %w", k.classify(err))
	}
	return nil
}

// restoreBatch is how many keys one statement of Restore writes.
const restoreBatch = 1000

// Restore loads a backup stream (package kvbackup: what Badger's Backup or
// [KV.Backup] wrote) in one transaction: all of it or, on an error, none.
// Every live key of the backup is written, the backup's value and expiry
// winning; keys only present in the database are kept (a merge). Keys
// deleted or expired at backup time are skipped.
func (k *KV) Restore(r io.Reader) error {
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, k.pool, func(tx pgx.Tx) error {
		var b upsertBatch
		exec := func(sql string, args ...any) error {
			_, err := tx.Exec(ctx, sql, args...)
			return err
		}
		err := kvbackup.Read(r, func(e kvbackup.Entry) error {
			ttl := int64(0)
			if e.ExpiresAt != 0 {
				ttl = int64(min(e.ExpiresAt, 1<<62))
			}
			b.add(e.Key, e.Value, ttl)
			if b.len() >= restoreBatch {
				return b.exec(exec, upsertAtUnix)
			}
			return nil
		})
		if err != nil {
			return err
		}
		return b.exec(exec, upsertAtUnix)
	})
	if err != nil {
		return fmt.Errorf("restoring storage: %w", k.classify(err))
	}
	return nil
}

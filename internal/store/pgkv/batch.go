package pgkv

// upsertBatch collects rows written by one multi-row statement: the arrays
// travel as three parameters and unnest turns them back into rows, so a
// thousand keys cost one round trip instead of a thousand.
type upsertBatch struct {
	keys, values [][]byte
	expires      []int64
	at           map[string]int // key -> index, for a key added twice
}

// add queues key; a key already queued takes the later value, as a second
// Set would.
func (b *upsertBatch) add(key, value []byte, expires int64) {
	if value == nil {
		value = []byte{} // pgx sends a nil slice as NULL
	}
	if b.at == nil {
		b.at = map[string]int{}
	}
	if i, ok := b.at[string(key)]; ok {
		b.values[i], b.expires[i] = value, expires
		return
	}
	b.at[string(key)] = len(b.keys)
	b.keys = append(b.keys, key)
	b.values = append(b.values, value)
	b.expires = append(b.expires, expires)
}

func (b *upsertBatch) len() int { return len(b.keys) }

// exec runs sql with the queued rows as $1 (keys), $2 (values) and $3
// (expiries) through run and empties the batch.
func (b *upsertBatch) exec(run func(sql string, args ...any) error, sql string) error {
	if len(b.keys) == 0 {
		return nil
	}
	err := run(sql, b.keys, b.values, b.expires)
	b.keys, b.values, b.expires = b.keys[:0], b.values[:0], b.expires[:0]
	clear(b.at)
	return err
}

// upsertAtUnix writes rows whose expiry is in Unix seconds (0: none), as a
// backup stream carries it.
const upsertAtUnix = `INSERT INTO fhirgate_kv (key, value, expires_at)
SELECT k, v, CASE WHEN e = 0 THEN NULL ELSE to_timestamp(e) END
FROM unnest($1::bytea[], $2::bytea[], $3::bigint[]) AS t(k, v, e)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`

// upsertAfter writes rows whose expiry is a TTL in microseconds from the
// transaction's start (0: none), as Txn.Set takes it.
const upsertAfter = `INSERT INTO fhirgate_kv (key, value, expires_at)
SELECT k, v, CASE WHEN e = 0 THEN NULL ELSE now() + e * interval '1 microsecond' END
FROM unnest($1::bytea[], $2::bytea[], $3::bigint[]) AS t(k, v, e)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`

// deleteKeys deletes the keys of $1.
const deleteKeys = `DELETE FROM fhirgate_kv WHERE key = ANY($1::bytea[])`

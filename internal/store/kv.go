package store

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned when a key or resource does not exist (or has
// expired).
var ErrNotFound = errors.New("not found")

// ErrStopScan is returned by a [Txn.Scan] callback to end the scan early.
// Scan then returns nil: it is a signal, not an error.
var ErrStopScan = errors.New("stop scan")

// KV is the narrow transactional key-value interface the resource layer is
// built on. Implementations must provide snapshot reads and serializable
// read-write transactions: a transaction that read a key another committed
// transaction has since written must fail (and be retried by Update).
type KV interface {
	// View runs fn in a read-only snapshot transaction.
	View(ctx context.Context, fn func(Txn) error) error
	// Update runs fn in a read-write transaction and commits it if fn returns
	// nil. On a serialization conflict the whole fn is run again (a bounded
	// number of times), so fn must have no side effects outside the
	// transaction. When the retries are exhausted the error wraps ErrConflict.
	// A nil return means the write is durable.
	Update(ctx context.Context, fn func(Txn) error) error
	// Close releases the storage.
	Close() error
}

// Txn is one transaction of a [KV].
type Txn interface {
	// Get returns a copy of the value stored at key, or ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Set stores value at key. A ttl > 0 makes the key expire after ttl
	// (second granularity); 0 keeps it forever.
	Set(key, value []byte, ttl time.Duration) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(key []byte) error
	// Scan calls fn for every key starting with prefix, in ascending key order
	// (descending when reverse is set). key and value are copies that fn may
	// retain. Returning ErrStopScan from fn ends the scan and Scan returns nil;
	// any other error ends it and is returned. Writes made earlier in the same
	// transaction are visible.
	Scan(prefix []byte, reverse bool, fn func(key, value []byte) error) error
}

// Prefetcher is implemented by a [Txn] whose reads each cost a round trip
// to a server (PostgreSQL). Prefetch reads many keys at once; Gets of them
// later in the same transaction are answered from what it read, or from
// the transaction's own writes since. The resource layer calls it before
// applying a batch of writes, whose checks read a few keys per record.
type Prefetcher interface {
	Prefetch(keys [][]byte) error
}

// PointReader is implemented by a KV whose transactions cost round trips
// to a server (PostgreSQL): ReadKey reads one key as one statement, where
// a View around one Get costs a BEGIN and a COMMIT besides. It answers as
// that View would: a copy of the value, or ErrNotFound when the key is
// missing or expired. Reads of a single record go through it.
type PointReader interface {
	ReadKey(ctx context.Context, key []byte) ([]byte, error)
}

// DeferredUpdater is implemented by a KV that can commit a transaction
// without waiting for it to reach the disk. The Subscription engine's
// triggers use it: a write's answer then waits for its trigger's commit
// but not for a disk sync; so do AuditEvent batches (PutOptions.Deferred).
// Everything else keeps Update's guarantee.
type DeferredUpdater interface {
	// UpdateDeferred is Update, except that a nil return means the write
	// is committed and visible, and survives a crash of this process, but
	// reaches the disk (surviving a crash of the machine or of the
	// database server) only shortly after: the KV makes it durable in the
	// background (Badger: within a tenth of a second; PostgreSQL: within
	// about three times wal_writer_delay).
	UpdateDeferred(ctx context.Context, fn func(Txn) error) error
	// Flush returns once every write committed before the call is durable.
	Flush(ctx context.Context) error
}

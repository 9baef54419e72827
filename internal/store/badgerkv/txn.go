package badgerkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/fhirgate/fhirgate/internal/store"
)

type badgerTxn struct {
	ctx context.Context
	txn *badger.Txn
	// wrote says Set or Delete was called (Update syncs only then).
	wrote bool
}

// scanCtxCheckEvery is how many keys a scan visits between context checks.
const scanCtxCheckEvery = 256

func (t *badgerTxn) Get(key []byte) ([]byte, error) {
	item, err := t.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading key %q: %w", key, err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, fmt.Errorf("reading value of %q: %w", key, err)
	}
	return v, nil
}

func (t *badgerTxn) Set(key, value []byte, ttl time.Duration) error {
	t.wrote = true
	e := badger.NewEntry(key, value)
	if ttl > 0 {
		e = e.WithTTL(ttl)
	}
	if err := t.txn.SetEntry(e); err != nil {
		if errors.Is(err, badger.ErrTxnTooBig) {
			return fmt.Errorf("writing key %q: %w", key, store.ErrTxnTooBig)
		}
		return fmt.Errorf("writing key %q: %w", key, err)
	}
	return nil
}

func (t *badgerTxn) Delete(key []byte) error {
	t.wrote = true
	if err := t.txn.Delete(key); err != nil {
		if errors.Is(err, badger.ErrTxnTooBig) {
			return fmt.Errorf("deleting key %q: %w", key, store.ErrTxnTooBig)
		}
		return fmt.Errorf("deleting key %q: %w", key, err)
	}
	return nil
}

func (t *badgerTxn) Scan(prefix []byte, reverse bool, fn func(key, value []byte) error) error {
	opts := badger.DefaultIteratorOptions
	opts.Reverse = reverse
	if !reverse {
		// Prefix lets Badger skip tables outside the range. In reverse mode
		// it would also make Valid false on the seek position just past the
		// range (see seekReverse), so there the loop condition filters.
		opts.Prefix = prefix
	}
	// Most scans are over index keys with empty values; record values are
	// read lazily per item instead of prefetching.
	opts.PrefetchValues = false
	it := t.txn.NewIterator(opts)
	defer it.Close()

	if reverse {
		seekReverse(it, prefix)
	} else {
		it.Seek(prefix)
	}
	for n := 0; it.ValidForPrefix(prefix); it.Next() {
		if n++; n%scanCtxCheckEvery == 0 {
			if err := t.ctx.Err(); err != nil {
				return err
			}
		}
		item := it.Item()
		v, err := item.ValueCopy(nil)
		if err != nil {
			return fmt.Errorf("reading value of %q: %w", item.Key(), err)
		}
		if err := fn(item.KeyCopy(nil), v); err != nil {
			if errors.Is(err, store.ErrStopScan) {
				return nil
			}
			return err
		}
	}
	return nil
}

// seekReverse positions a reverse iterator on the last key with prefix. A
// reverse Seek lands on the largest key <= its argument, so it seeks to the
// smallest key greater than every prefixed key and steps past it if it
// exists.
func seekReverse(it *badger.Iterator, prefix []byte) {
	upper := prefixSuccessor(prefix)
	if upper == nil {
		it.Rewind()
		return
	}
	it.Seek(upper)
	if it.Valid() && bytes.Equal(it.Item().Key(), upper) {
		it.Next()
	}
}

// prefixSuccessor returns the smallest key greater than all keys starting
// with prefix, or nil when there is none (empty or all-0xff prefix).
func prefixSuccessor(prefix []byte) []byte {
	up := bytes.Clone(prefix)
	for i := len(up) - 1; i >= 0; i-- {
		if up[i] < 0xff {
			up[i]++
			return up[:i+1]
		}
	}
	return nil
}

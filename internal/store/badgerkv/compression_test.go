package badgerkv

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/fhirgate/fhirgate/internal/store"
)

// TestOpensTablesWrittenCompressed: stores written by earlier releases hold
// Snappy tables, and values of 512 bytes to 1 KiB inside them (the value
// threshold was 1 KiB). Badger records each table's compression in its
// manifest and marks each value that is a value-log pointer, so the old
// tables must stay readable, and compaction must be able to merge them with
// new uncompressed ones whose values of that size are pointers.
func TestOpensTablesWrittenCompressed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	old := badgerOptions(Options{Dir: dir})
	old.Compression = options.Snappy
	old.BlockCacheSize = 8 << 20
	old.ValueThreshold = 1 << 10
	db, err := badger.Open(old)
	if err != nil {
		t.Fatalf("opening with Snappy: %v", err)
	}
	// 526 bytes: in the tree under the old threshold, in the value log now.
	value := func(i int) string { return fmt.Sprintf("%05d:%s", i, strings.Repeat("compressible ", 40)) }
	key := func(i int) []byte { return fmt.Appendf(nil, "k/%05d", i) }
	const n = 3000
	for i := 0; i < n; i += 100 {
		if err := db.Update(func(txn *badger.Txn) error {
			for j := i; j < i+100; j++ {
				if err := txn.Set(key(j), []byte(value(j))); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatalf("writing: %v", err)
		}
	}
	if err := db.Close(); err != nil { // flushes the memtable into Snappy tables
		t.Fatalf("closing: %v", err)
	}
	if tables, _ := filepath.Glob(filepath.Join(dir, "*.sst")); len(tables) == 0 {
		t.Fatal("no tables were written; the test would not read any compressed data")
	}

	kv, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("reopening with today's options: %v", err)
	}
	defer kv.Close()
	// New uncompressed data next to the old, some of it replacing old
	// entries, then merge everything.
	if err := kv.Update(ctx, func(txn store.Txn) error {
		for i := n - 50; i < n+100; i++ {
			if err := txn.Set(key(i), []byte(value(i)), 0); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("writing after reopen: %v", err)
	}
	if err := kv.db.Flatten(1); err != nil {
		t.Fatalf("compacting old and new tables together: %v", err)
	}
	if err := kv.View(ctx, func(txn store.Txn) error {
		seen := 0
		if err := txn.Scan([]byte("k/"), false, func(k, v []byte) error {
			if want := value(seen); string(k) != string(key(seen)) || string(v) != want {
				return fmt.Errorf("entry %d: got %q=%.20q", seen, k, v)
			}
			seen++
			return nil
		}); err != nil {
			return err
		}
		if seen != n+100 {
			return fmt.Errorf("scanned %d entries, want %d", seen, n+100)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

package badgerkv

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
)

// TestGCDeletesARewrittenLogAfterASync: value-log GC moves a file's live
// entries and deletes the file; with SyncWrites off the file must outlive
// a sync pass started after the move, or a machine crash could lose them.
func TestGCDeletesARewrittenLogAfterASync(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, GCInterval: -1, TrimInterval: -1, valueLogFileSize: 1 << 20}
	ctx := context.Background()
	value := make([]byte, 64<<10)
	var kv *KV
	// Each round replaces every value; each reopen writes the memtable
	// out as a level-0 table, and their compaction drops the replaced
	// versions, which fills Badger's discard statistics.
	for round := range 6 {
		var err error
		if kv, err = Open(o); err != nil {
			t.Fatal(err)
		}
		for k := range 40 {
			value[0] = byte(round)
			if err := kv.Update(ctx, func(tx store.Txn) error {
				return tx.Set([]byte(fmt.Sprintf("k%02d", k)), value, 0)
			}); err != nil {
				t.Fatal(err)
			}
		}
		if round < 5 {
			if err := kv.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer kv.Close()
	if err := kv.db.Flatten(1); err != nil {
		t.Fatal(err)
	}
	vlogs := func() map[string]bool {
		m := map[string]bool{}
		names, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
		for _, n := range names {
			m[filepath.Base(n)] = true
		}
		return m
	}
	var mu sync.Mutex
	var seen []map[string]bool // the value logs at each sync pass
	kv.syncer.mu.Lock()
	orig := kv.syncer.syncFn
	kv.syncer.syncFn = func() error {
		mu.Lock()
		seen = append(seen, vlogs())
		mu.Unlock()
		return orig()
	}
	kv.syncer.mu.Unlock()
	before := vlogs()
	kv.RunGC()
	after := vlogs()
	var deleted []string
	for n := range before {
		if !after[n] {
			deleted = append(deleted, n)
		}
	}
	if len(deleted) == 0 {
		t.Fatalf("GC rewrote no value log (before %v, after %v)", before, after)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range deleted {
		synced := false
		for _, s := range seen {
			synced = synced || s[n]
		}
		if !synced {
			t.Fatalf("value log %s was deleted before a sync pass (passes saw %v)", n, seen)
		}
	}
	for k := range 40 {
		if err := kv.View(ctx, func(tx store.Txn) error { _, err := tx.Get([]byte(fmt.Sprintf("k%02d", k))); return err }); err != nil {
			t.Fatalf("k%02d after GC: %v", k, err)
		}
	}
}

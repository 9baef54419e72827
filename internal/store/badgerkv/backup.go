package badgerkv

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/dgraph-io/badger/v4"

	"github.com/fhirgate/fhirgate/internal/store/kvbackup"
)

// Backup writes a full backup of the database to w in Badger's backup format
// (what `badger backup` and DB.Backup produce, package kvbackup), which the
// PostgreSQL storage restores too. It runs on a snapshot and does not block
// writers.
func (b *KV) Backup(w io.Writer) error {
	if _, err := b.db.Backup(w, 0); err != nil {
		return fmt.Errorf("backing up storage: %w", err)
	}
	return nil
}

// Restore loads a backup stream (package kvbackup: what [KV.Backup] and
// the PostgreSQL storage's Backup write). Every live key of the backup is
// written at a fresh version, so the backup's value wins over the current
// one; keys only present in the database are kept (a merge). Keys deleted
// or expired at backup time are skipped. For an exact copy, restore into an
// empty directory.
//
// It does not use DB.Load on purpose: Load keeps the backup's own versions,
// so any key modified after the backup was taken would silently keep its
// newer value.
func (b *KV) Restore(r io.Reader) error {
	if err := b.guard.check(); err != nil {
		return err
	}
	wb := b.db.NewWriteBatch()
	defer wb.Cancel()
	err := kvbackup.Read(r, func(e kvbackup.Entry) error {
		if err := wb.SetEntry(&badger.Entry{Key: e.Key, Value: e.Value, ExpiresAt: e.ExpiresAt}); err != nil {
			return fmt.Errorf("writing key %q: %w", e.Key, err)
		}
		return nil
	})
	if err == nil {
		err = wb.Flush()
	}
	if err == nil && b.syncer != nil {
		// Synced like any acknowledged write (Badger does not: SyncWrites
		// is off, see syncer.go).
		err = b.syncer.wait(context.Background(), b.syncer.committedOne())
	}
	if err != nil {
		return fmt.Errorf("restoring storage: %w", err)
	}
	return nil
}

// gcDiscardRatio is the share of stale data a value log file needs before GC
// rewrites it; Badger's docs recommend 0.5.
const gcDiscardRatio = 0.5

// RunGC reclaims value-log space: it rewrites log files until Badger reports
// nothing left to rewrite. Safe to call periodically and concurrently (a
// second concurrent pass is rejected by Badger and returns at once).
func (b *KV) RunGC() {
	for {
		err := b.gcOnce()
		switch {
		case err == nil:
			continue
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected),
			errors.Is(err, badger.ErrGCInMemoryMode):
		default:
			b.warnf("value log GC: %v", err)
		}
		return
	}
}

// gcOnce rewrites one value log file. Badger writes the file's live
// entries again and then deletes it; with SyncWrites off (syncer.go) the
// moved entries are not on disk yet when it does, and a crash of the
// machine then would lose them — acknowledged data, however old. Badger
// defers the deletion while an iterator is open (valueLog.rewrite, until
// the last iterator closes), so one is held until a sync pass that started
// after the rewrite has finished.
func (b *KV) gcOnce() error {
	if b.syncer == nil {
		return b.db.RunValueLogGC(gcDiscardRatio)
	}
	txn := b.db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{}) // never positioned: it reads nothing
	err := b.db.RunValueLogGC(gcDiscardRatio)
	if err == nil {
		if serr := b.syncer.wait(context.Background(), b.syncer.committedOne()); serr != nil {
			err = fmt.Errorf("syncing the entries value-log GC moved: %w", serr)
		}
	}
	it.Close() // deletes the rewritten file
	return err
}

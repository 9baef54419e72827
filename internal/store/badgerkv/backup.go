package badgerkv

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/proto"
)

// Backup writes a full backup of the database to w in Badger's backup format
// (what `badger backup` and DB.Backup produce). It runs on a snapshot and does
// not block writers.
func (b *KV) Backup(w io.Writer) error {
	if _, err := b.db.Backup(w, 0); err != nil {
		return fmt.Errorf("backing up storage: %w", err)
	}
	return nil
}

// badgerBitDelete mirrors Badger's unexported bitDelete meta flag, which a
// backup stream carries for deleted keys (value.go in badger/v4).
const badgerBitDelete byte = 1 << 0

// maxBackupListSize caps one length-prefixed record of a backup stream so a
// corrupt length cannot make Restore allocate gigabytes.
const maxBackupListSize = 1 << 30

// Restore loads a stream written by [Badger.Backup]. Every live key of the
// backup is written at a fresh version, so the backup's value wins over the
// current one; keys only present in the database are kept (a merge). Keys
// deleted or expired at backup time are skipped. For an exact copy, restore
// into an empty directory.
//
// It does not use DB.Load on purpose: Load keeps the backup's own versions,
// so any key modified after the backup was taken would silently keep its
// newer value.
func (b *KV) Restore(r io.Reader) error {
	if err := b.guard.check(); err != nil {
		return err
	}
	br := bufio.NewReaderSize(r, 64<<10)
	wb := b.db.NewWriteBatch()
	defer wb.Cancel()
	var buf []byte
	now := uint64(time.Now().Unix())
	for {
		var size uint64
		err := binary.Read(br, binary.LittleEndian, &size)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("restoring storage: reading record length: %w", err)
		}
		if size > maxBackupListSize {
			return fmt.Errorf("restoring storage: record of %d bytes is not a valid backup", size)
		}
		if uint64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		if _, err := io.ReadFull(br, buf[:size]); err != nil {
			return fmt.Errorf("restoring storage: reading record: %w", err)
		}
		var list pb.KVList
		if err := proto.Unmarshal(buf[:size], &list); err != nil {
			return fmt.Errorf("restoring storage: decoding record: %w", err)
		}
		var last []byte
		for _, kv := range list.Kv {
			// A key's versions arrive newest first; only the newest counts.
			if last != nil && bytes.Equal(kv.Key, last) {
				continue
			}
			last = kv.Key
			if len(kv.Meta) > 0 && kv.Meta[0]&badgerBitDelete != 0 {
				continue
			}
			if kv.ExpiresAt != 0 && kv.ExpiresAt <= now {
				continue
			}
			e := &badger.Entry{Key: kv.Key, Value: kv.Value, ExpiresAt: kv.ExpiresAt}
			if err := wb.SetEntry(e); err != nil {
				return fmt.Errorf("restoring storage: writing key %q: %w", kv.Key, err)
			}
		}
	}
	if err := wb.Flush(); err != nil {
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
		err := b.db.RunValueLogGC(gcDiscardRatio)
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

// Package kvbackup reads and writes the one backup stream every [store.KV]
// speaks, so a backup taken on one storage restores into the other (Badger
// to PostgreSQL is the migration path to several replicas, and back).
//
// The format is Badger's own backup stream, what DB.Backup and `badger
// backup` write, so backups taken before PostgreSQL existed still load: a
// sequence of records, each an unsigned 64-bit little-endian length and
// then that many bytes of a protobuf KVList (badger/v4/pb). A KV carries
// its key, value, version, expiry (Unix seconds, 0 for none) and Badger's
// meta byte (its bit 0 marks a deleted key). A key may come several times,
// newest version first; only the newest counts.
package kvbackup

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/proto"
)

// Entry is one live key of a backup.
type Entry struct {
	Key, Value []byte
	// ExpiresAt is when the key expires, in Unix seconds; 0 means never.
	ExpiresAt uint64
}

// bitDelete mirrors Badger's unexported bitDelete meta flag, which a
// backup stream carries for deleted keys (value.go in badger/v4).
const bitDelete byte = 1 << 0

// maxRecordSize caps one length-prefixed record so a corrupt length cannot
// make Read allocate gigabytes.
const maxRecordSize = 1 << 30

// Read calls fn for every live key of the stream r: the newest version of
// each key, skipping keys deleted or already expired (by this machine's
// clock) when the backup was taken or since. Entries may share memory with
// the next record; fn must copy what it keeps past its return.
func Read(r io.Reader, fn func(Entry) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	now := uint64(time.Now().Unix())
	for {
		var size uint64
		err := binary.Read(br, binary.LittleEndian, &size)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading record length: %w", err)
		}
		if size > maxRecordSize {
			return fmt.Errorf("record of %d bytes is not a valid backup", size)
		}
		if uint64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		if _, err := io.ReadFull(br, buf[:size]); err != nil {
			return fmt.Errorf("reading record: %w", err)
		}
		var list pb.KVList
		if err := proto.Unmarshal(buf[:size], &list); err != nil {
			return fmt.Errorf("decoding record: %w", err)
		}
		var last []byte
		for _, kv := range list.Kv {
			// A key's versions arrive newest first; only the newest counts.
			if last != nil && bytes.Equal(kv.Key, last) {
				continue
			}
			last = kv.Key
			if len(kv.Meta) > 0 && kv.Meta[0]&bitDelete != 0 {
				continue
			}
			if kv.ExpiresAt != 0 && kv.ExpiresAt <= now {
				continue
			}
			if err := fn(Entry{Key: kv.Key, Value: kv.Value, ExpiresAt: kv.ExpiresAt}); err != nil {
				return err
			}
		}
	}
}

// recordTarget is the size at which Writer ends a record: Badger's own
// backups send lists of up to a few MiB.
const recordTarget = 1 << 20

// Writer writes a backup stream.
type Writer struct {
	w    io.Writer
	list pb.KVList
	size int
	buf  []byte
}

// NewWriter returns a Writer on w; call Flush after the last Add.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Add appends one live key. Keys must come in ascending order, each once.
func (w *Writer) Add(e Entry) error {
	w.list.Kv = append(w.list.Kv, &pb.KV{Key: e.Key, Value: e.Value, ExpiresAt: e.ExpiresAt, Version: 1})
	w.size += len(e.Key) + len(e.Value) + 16
	if w.size >= recordTarget {
		return w.Flush()
	}
	return nil
}

// Flush writes the keys added since the last record as one record.
func (w *Writer) Flush() error {
	if len(w.list.Kv) == 0 {
		return nil
	}
	buf, err := proto.MarshalOptions{}.MarshalAppend(w.buf[:0], &w.list)
	if err != nil {
		return fmt.Errorf("encoding backup record: %w", err)
	}
	w.buf = buf
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(w.buf)))
	if _, err := w.w.Write(n[:]); err != nil {
		return fmt.Errorf("writing backup: %w", err)
	}
	if _, err := w.w.Write(w.buf); err != nil {
		return fmt.Errorf("writing backup: %w", err)
	}
	w.list.Kv = w.list.Kv[:0]
	w.size = 0
	return nil
}

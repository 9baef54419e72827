package store

import (
	"bytes"
	"sync"
)

// AppendPooled returns what appendTo appends to an empty buffer, as a
// slice of its own of exactly that length. appendTo writes into a pooled
// scratch buffer: an encoder of records cannot hand the scratch itself to
// a store that keeps the bytes until its transaction commits, and a
// guessed capacity either wastes most of itself or, when the record
// outgrows it (a bot run's AuditEvent is just over 1 KB, a Subscription
// trigger's job about 1.5 KB), is allocated again at 1.5 times the size:
// about 2.5 KB of garbage per record where the copy is the record's own
// size (BenchmarkRunMessage, BenchmarkRecordEncoding). appendTo must not
// keep the buffer it is given.
func AppendPooled(appendTo func(b []byte) []byte) []byte {
	scratch := scratchPool.Get().(*[]byte)
	b := appendTo((*scratch)[:0])
	out := bytes.Clone(b)
	if cap(b) <= maxPooledScratch {
		*scratch = b
		scratchPool.Put(scratch)
	}
	return out
}

// scratchPool holds AppendPooled's scratch buffers (*[]byte).
var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledScratch keeps a rare huge record (a long console tail, a job
// carrying a large resource) from pinning its buffer in the pool.
const maxPooledScratch = 64 << 10

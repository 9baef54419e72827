package botrunner

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// The pool and its workers talk over the worker's stdin and stdout in frames: a 4-byte
// big-endian length, then that many bytes: a type byte and the payload. Payloads are a flat
// binary encoding (uvarints, and byte strings prefixed with their length): the run request and
// result are the only frames on the hot path, and reflection-based codecs cost more than the
// trivial bot they carry.
//
// A run, as the frames go (P = pool, W = worker):
//
//	P→W init    limits, once, right after start;  W→P hello  the protocol version
//	P→W run     id, timeout, deadline, code digest (code only when the digest is empty), event
//	W→P need    id: the worker lacks the digest's program; P→W code  id, code
//	W→P do      id, call, method, path, query, body, headers: a medplum call
//	P→W answer  id, call, status, content type, body or error
//	W→P fetch   id, call, method, URL, headers, body, redirect mode: a fetch (fetchrpc.go)
//	P→W fetched id, call, status, URL, headers, body or error; any number may be in flight
//	P→W cancel  id: the caller went away
//	W→P result  id, the Result
//
// A worker runs one bot at a time, so frames of different runs never interleave on a pipe; the
// run id still guards against a late frame of an earlier run.
const (
	frameInit    byte = 'i'
	frameHello   byte = 'h'
	frameRun     byte = 'r'
	frameNeed    byte = 'n'
	frameCode    byte = 'c'
	frameDo      byte = 'd'
	frameAnswer  byte = 'a'
	frameCancel  byte = 'x'
	frameResult  byte = 'f'
	frameFetch   byte = 'g'
	frameFetched byte = 'e'
)

// protocolVersion is exchanged in init and hello: a gateway upgraded on disk while running
// starts workers from the new binary, which must not be spoken to in an old dialect.
const protocolVersion = "fhirgate-bot-worker/3"

// maxParentFrame bounds frames the worker reads. The parent is trusted; this only turns a
// corrupted length into an error instead of a huge allocation.
const maxParentFrame = 1 << 30

var errFrameTooLarge = errors.New("frame exceeds the size limit")

// frameWriter writes whole frames; it is safe for concurrent use.
type frameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// send encodes a frame with fill and writes it in one call.
func (fw *frameWriter) send(typ byte, fill func(e *encoder)) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	e := encoder{b: append(fw.buf[:0], 0, 0, 0, 0, typ)}
	if fill != nil {
		fill(&e)
	}
	if len(e.b)-4 > maxParentFrame {
		return errFrameTooLarge
	}
	binary.BigEndian.PutUint32(e.b, uint32(len(e.b)-4))
	_, err := fw.w.Write(e.b)
	if cap(e.b) <= 1<<20 { // keep a small buffer for the next frame, not a huge one
		fw.buf = e.b
	}
	return err
}

// frameReader reads frames of at most max bytes.
type frameReader struct {
	r   *bufio.Reader
	max int
}

func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next frame's type and payload. The payload is freshly allocated, so
// decoded byte slices may point into it.
func (fr *frameReader) next() (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(fr.r, head[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(head[:4]))
	if n < 1 {
		return 0, nil, errors.New("empty frame")
	}
	if n > fr.max {
		return 0, nil, fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, n, fr.max)
	}
	payload := make([]byte, n-1)
	if _, err := io.ReadFull(fr.r, payload); err != nil {
		return 0, nil, err
	}
	return head[4], payload, nil
}

type encoder struct{ b []byte }

func (e *encoder) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) int(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)  { e.uint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bytes(b []byte) {
	e.uint(uint64(len(b)))
	e.b = append(e.b, b...)
}

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

// decoder reads what encoder wrote. The first error sticks; later reads return zero values.
type decoder struct {
	b   []byte
	err error
}

var errShortFrame = errors.New("truncated frame")

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errShortFrame
	}
	d.b = nil
}

func (d *decoder) uint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes returns the next byte string; it points into the frame.
func (d *decoder) bytes() []byte {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	b := d.b[:n:n]
	d.b = d.b[n:]
	return b
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) str() string { return string(d.bytes()) }

func (d *decoder) bool() bool {
	if len(d.b) == 0 {
		d.fail()
		return false
	}
	v := d.b[0] != 0
	d.b = d.b[1:]
	return v
}

// done reports a decoding error, or trailing bytes, which mean the two sides disagree.
func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = errors.New("unexpected bytes at the end of a frame")
	}
	return d.err
}

func (e *encoder) stringMap(m map[string]string) {
	e.uint(uint64(len(m)))
	for k, v := range m {
		e.str(k)
		e.str(v)
	}
}

// stringMap decodes a map; an empty one comes back nil unless keepEmpty.
func (d *decoder) stringMap(keepEmpty bool) map[string]string {
	n := d.uint()
	if n > uint64(len(d.b)) { // every entry takes at least two bytes
		d.fail()
		return nil
	}
	if n == 0 && !keepEmpty {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := d.str()
		m[k] = d.str()
	}
	return m
}

func (e *encoder) header(h http.Header) {
	e.uint(uint64(len(h)))
	for k, vs := range h {
		e.str(k)
		e.uint(uint64(len(vs)))
		for _, v := range vs {
			e.str(v)
		}
	}
}

func (d *decoder) header() http.Header {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	h := make(http.Header, n)
	for range n {
		k := d.str()
		c := d.uint()
		if c > uint64(len(d.b)) {
			d.fail()
			return nil
		}
		vs := make([]string, 0, c)
		for range c {
			vs = append(vs, d.str())
		}
		h[k] = vs
	}
	return h
}

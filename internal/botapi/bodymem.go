package botapi

import (
	"io"
	"runtime/debug"
	"sync"
	"time"
)

// Request bodies are the one thing a $execute holds in the gateway in proportion to its size
// (they are parsed by the runner once the run holds a slot, in the worker process under process
// isolation). After a burst of large bodies the Go heap is mostly garbage, but the runtime only
// returns it to the system after a collection, which an idle gateway may not run for minutes:
// to an operator, memory that stays is as good as leaked. So bodyMemory counts the body bytes
// in flight, and when a burst of at least releaseAfterBytes has drained, it has the runtime
// collect and return the memory — at most once per releaseInterval, so a steady stream of
// large bodies pays nothing.
const (
	releaseAfterBytes = 32 << 20
	releaseInterval   = 10 * time.Second
)

// bodyMemory tracks the request bodies held by runs.
type bodyMemory struct {
	mu       sync.Mutex
	held     int64     // bytes of bodies held now
	burst    int64     // the most held since the last release
	released time.Time // when memory was last returned
	pending  bool      // a release is scheduled
	free     func()    // debug.FreeOSMemory; a seam for tests
}

func newBodyMemory() *bodyMemory { return &bodyMemory{free: debug.FreeOSMemory} }

// hold records a body of n bytes until the returned function is called.
func (m *bodyMemory) hold(n int) (release func()) {
	if n == 0 {
		return func() {}
	}
	m.mu.Lock()
	m.held += int64(n)
	m.burst = max(m.burst, m.held)
	m.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { m.drop(int64(n)) }) }
}

func (m *bodyMemory) drop(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held -= n
	if m.held > 0 || m.burst < releaseAfterBytes || m.pending {
		return
	}
	m.pending = true
	wait := time.Until(m.released.Add(releaseInterval))
	time.AfterFunc(max(wait, 0), m.release)
}

// release returns the heap's free memory to the system, unless a new burst is under way.
func (m *bodyMemory) release() {
	m.mu.Lock()
	m.pending = false
	if m.held > 0 {
		m.mu.Unlock() // its end schedules the release
		return
	}
	m.burst = 0
	m.released = time.Now()
	m.mu.Unlock()
	m.free()
}

// readBody reads at most limit+1 bytes of r. With a Content-Length within the limit it
// allocates the body once, at its size, instead of growing a buffer by doubling (which leaves
// up to twice the body behind as garbage).
func readBody(r io.Reader, contentLength, limit int64) ([]byte, error) {
	r = io.LimitReader(r, limit+1)
	if contentLength <= 0 || contentLength > limit {
		return io.ReadAll(r)
	}
	buf := make([]byte, 0, contentLength+1) // +1: reading to EOF needs room for one more byte
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // a body longer than its Content-Length claimed
		}
	}
}

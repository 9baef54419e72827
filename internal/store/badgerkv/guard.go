package badgerkv

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
)

// probeInterval is how long a successful write probe is trusted. Free
// space is checked on every write (one statfs, about a microsecond); the
// probe creates and removes a file, so it runs at most this often while
// writes succeed, and on every write while they do not.
const probeInterval = 500 * time.Millisecond

// writeGuard refuses writes before Badger would attempt them on a disk that
// cannot take them. Badger writes its write-ahead log and value log through
// memory-mapped, sparse files: when the filesystem cannot allocate a page
// (full), or the file is immutable, the kernel answers the page fault with
// SIGBUS, which the Go runtime treats as fatal — one write would take the
// whole gateway down, reads and token validation included. The guard keeps
// a reserve of free space for Badger's own rotations, flushes and
// compactions, and probes that the directory still accepts new files.
//
// It narrows the window rather than closing it: a disk filled between the
// check and the write, files made immutable within the probe interval, or
// Badger's background work beyond the reserve can still fault. A dedicated filesystem or quota for the
// store is the real protection (see the README).
type writeGuard struct {
	dir     string
	reserve uint64

	mu        sync.Mutex                // one probe at a time
	probeOKTo atomic.Int64              // unix nanos until which the last good probe holds
	handle    atomic.Pointer[dirHandle] // nil until the directory could be opened
}

func newWriteGuard(dir string, reserve uint64) *writeGuard {
	g := &writeGuard{dir: dir, reserve: reserve}
	if h, err := openDir(dir); err == nil { // a missing directory is reported by check
		g.handle.Store(h)
	}
	return g
}

// close releases the directory handle.
func (g *writeGuard) close() error {
	if g == nil {
		return nil
	}
	if h := g.handle.Swap(nil); h != nil {
		return h.close()
	}
	return nil
}

// check returns nil when writes may go ahead, else an error wrapping
// store.ErrUnwritable that says why.
func (g *writeGuard) check() error {
	if g == nil {
		return nil
	}
	if err := g.space(); err != nil {
		return err
	}
	if time.Now().UnixNano() < g.probeOKTo.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Now().UnixNano() < g.probeOKTo.Load() {
		return nil // another writer just probed
	}
	if err := g.probe(); err != nil {
		return err
	}
	g.probeOKTo.Store(time.Now().Add(probeInterval).UnixNano())
	return nil
}

// space checks the filesystem has the reserve free and is not read-only.
func (g *writeGuard) space() error {
	h := g.handle.Load()
	if h == nil {
		opened, err := openDir(g.dir)
		if err != nil {
			return fmt.Errorf("%w: opening %s: %v", store.ErrUnwritable, g.dir, err)
		}
		if !g.handle.CompareAndSwap(nil, opened) {
			_ = opened.close()
		}
		h = g.handle.Load()
	}
	free, readOnly, err := h.status()
	switch {
	case err != nil:
		return fmt.Errorf("%w: checking free space in %s: %v", store.ErrUnwritable, g.dir, err)
	case readOnly:
		return fmt.Errorf("%w: %s is read-only (read-only mount or immutable attribute)", store.ErrUnwritable, g.dir)
	case free < g.reserve:
		return fmt.Errorf("%w: %s has %d MiB free, less than the %d MiB the store keeps in reserve",
			store.ErrUnwritable, g.dir, free>>20, g.reserve>>20)
	}
	return nil
}

// freeSpace returns the bytes free on the directory's filesystem.
func (g *writeGuard) freeSpace() (uint64, error) {
	h := g.handle.Load()
	if h == nil {
		return 0, fmt.Errorf("%s could not be opened", g.dir)
	}
	free, _, err := h.status()
	return free, err
}

// probe creates and removes a file, which fails on a read-only or
// immutable directory.
func (g *writeGuard) probe() error {
	f, err := os.CreateTemp(g.dir, ".write-probe-*")
	if err != nil {
		return fmt.Errorf("%w: %s does not accept new files: %v", store.ErrUnwritable, g.dir, err)
	}
	name := f.Name()
	_ = f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("%w: %s: removing the write probe: %v", store.ErrUnwritable, g.dir, err)
	}
	return nil
}

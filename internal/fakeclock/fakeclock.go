// Package fakeclock is a settable clock for tests of code with a Now seam
// (token lifetimes, cache expiry). It has no Caddy or store imports.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a time that moves only when told to. It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock at a fixed instant, so tests see the same times on
// every run.
func New() *Clock { return &Clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

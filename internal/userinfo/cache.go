package userinfo

import (
	"sync"
	"time"
)

// cache holds successful answers, keyed by the hash from cacheKey. It is
// bounded and never returns an entry after its expiry.
type cache struct {
	mu  sync.RWMutex
	max int
	m   map[[32]byte]cacheEntry
}

type cacheEntry struct {
	info    *Info // never modified after insertion; Lookup hands out clones
	expires time.Time
}

func newCache(size int) *cache {
	return &cache{max: size, m: make(map[[32]byte]cacheEntry)}
}

func (c *cache) get(key *[32]byte, now time.Time) (*Info, bool) {
	c.mu.RLock()
	e, ok := c.m[*key]
	c.mu.RUnlock()
	if !ok || !now.Before(e.expires) {
		return nil, false
	}
	return e.info, true
}

// evictProbe is how many entries a full cache looks at to make room.
const evictProbe = 8

func (c *cache) put(key *[32]byte, info *Info, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[*key]; !ok && len(c.m) >= c.max {
		// Map iteration starts at a random entry, so this evicts the
		// soonest-expiring of a few random entries: O(1), no bookkeeping on
		// the read path, and expired entries go first.
		var victim [32]byte
		var victimExpires time.Time
		n := 0
		for k, e := range c.m {
			if n == 0 || e.expires.Before(victimExpires) {
				victim, victimExpires = k, e.expires
			}
			if n++; n == evictProbe {
				break
			}
		}
		delete(c.m, victim)
	}
	c.m[*key] = cacheEntry{info: info, expires: expires}
}

func (c *cache) delete(key *[32]byte) {
	c.mu.Lock()
	delete(c.m, *key)
	c.mu.Unlock()
}

func (c *cache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

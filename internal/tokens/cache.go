package tokens

import (
	"sync"
	"time"
)

// cacheShards spreads the lock so parallel requests rarely contend.
const cacheShards = 32

// verifiedCache maps canonicalKey(token) to the claims of a verified access
// token. It is bounded (about size entries) and never returns an entry at or
// after its token's exp.
type verifiedCache struct {
	perShard int
	shards   [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[[32]byte]*Claims
	_  [40]byte // keep shards on separate cache lines
}

func newVerifiedCache(size int) *verifiedCache {
	c := &verifiedCache{perShard: max(1, (size+cacheShards-1)/cacheShards)}
	for i := range c.shards {
		c.shards[i].m = make(map[[32]byte]*Claims)
	}
	return c
}

func (c *verifiedCache) shard(h *[32]byte) *cacheShard {
	return &c.shards[int(h[0])%cacheShards]
}

// get returns the cached claims; the caller must not modify them.
func (c *verifiedCache) get(h *[32]byte, now time.Time) (*Claims, bool) {
	sh := c.shard(h)
	sh.mu.RLock()
	cl, ok := sh.m[*h]
	sh.mu.RUnlock()
	if !ok || !now.Before(cl.ExpiresAt) {
		return nil, false
	}
	return cl, true
}

// evictProbe is how many entries a full shard looks at to make room.
const evictProbe = 8

func (c *verifiedCache) put(h *[32]byte, cl *Claims, now time.Time) {
	sh := c.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[*h]; !ok && len(sh.m) >= c.perShard {
		// Map iteration starts at a random entry, so this is random
		// eviction that prefers expired entries: O(1), no bookkeeping on
		// the read path, and good enough for tokens that are re-presented
		// for as long as they live.
		var victim [32]byte
		found, n := false, 0
		for k, v := range sh.m {
			if !now.Before(v.ExpiresAt) {
				delete(sh.m, k)
			} else if !found {
				victim, found = k, true
			}
			if n++; n == evictProbe {
				break
			}
		}
		if found && len(sh.m) >= c.perShard {
			delete(sh.m, victim)
		}
	}
	sh.m[*h] = cl
}

func (c *verifiedCache) purge() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		clear(sh.m)
		sh.mu.Unlock()
	}
}

func (c *verifiedCache) len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		n += len(sh.m)
		sh.mu.RUnlock()
	}
	return n
}

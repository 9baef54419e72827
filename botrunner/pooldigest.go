package botrunner

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// digestCache remembers the digest of each cache key's code, so the pool hashes a bot's code
// once, not on every run. A worker caches compiled programs by digest, and a request carries
// the digest instead of the code.
type digestCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // front = most recently used; values are *digestEntry
	byKey map[string]*list.Element
}

type digestEntry struct {
	key, filename, code, digest string
}

func newDigestCache(max int) *digestCache {
	return &digestCache{max: max, order: list.New(), byKey: map[string]*list.Element{}}
}

// digest returns the digest of filename and code, which key names. Comparing the code with
// the remembered one is cheap when they share memory and a memcmp otherwise; a key reused for
// new code gets a new digest.
func (c *digestCache) digest(key, filename, code string) string {
	c.mu.Lock()
	if el := c.byKey[key]; el != nil {
		e := el.Value.(*digestEntry)
		if e.code == code && e.filename == filename {
			c.order.MoveToFront(el)
			c.mu.Unlock()
			return e.digest
		}
	}
	c.mu.Unlock()

	h := sha256.New()
	h.Write([]byte(filename))
	h.Write([]byte{0})
	h.Write([]byte(code))
	e := &digestEntry{key: key, filename: filename, code: code, digest: string(h.Sum(nil))}

	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.byKey[key]; el != nil {
		el.Value = e
		c.order.MoveToFront(el)
	} else {
		c.byKey[key] = c.order.PushFront(e)
	}
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*digestEntry).key)
	}
	return e.digest
}

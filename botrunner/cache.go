package botrunner

import (
	"container/list"
	"sync"

	"github.com/dop251/goja"
)

// programEntry is a compiled bot. A goja.Program is immutable and may run in many runtimes at once.
type programEntry struct {
	key      string
	code     string // the source it was compiled from, to notice a key reused for new code
	filename string
	prg      *goja.Program
	size     int  // bytes of code, for caches bounded in bytes
	noRegExp bool // prg cannot make regular expressions by ordinary means (mayUseRegExps)
	locale   bool // prg may call a toLocale*String method (mayUseLocale)
}

// programCache is a bounded LRU of compiled programs keyed by Request.CacheKey.
type programCache struct {
	mu       sync.Mutex
	max      int
	maxBytes int64 // bound on the entries' sizes; 0 = none
	bytes    int64
	order    *list.List // front = most recently used; values are *programEntry
	byKey    map[string]*list.Element
}

func newProgramCache(max int) *programCache {
	return &programCache{max: max, order: list.New(), byKey: map[string]*list.Element{}}
}

// get returns the entry for key if it was compiled from code. An empty key is never cached.
func (c *programCache) get(key, code string) *programEntry {
	if key == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.byKey[key]
	if el == nil {
		return nil
	}
	e := el.Value.(*programEntry)
	if e.code != code {
		return nil
	}
	c.order.MoveToFront(el)
	return e
}

func (c *programCache) put(key string, e *programEntry) {
	if key == "" {
		return
	}
	e.key = key
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.byKey[key]; el != nil {
		c.bytes -= int64(el.Value.(*programEntry).size)
		el.Value = e
		c.order.MoveToFront(el)
	} else {
		c.byKey[key] = c.order.PushFront(e)
	}
	c.bytes += int64(e.size)
	for c.order.Len() > c.max || (c.maxBytes > 0 && c.bytes > c.maxBytes && c.order.Len() > 1) {
		last := c.order.Back()
		c.order.Remove(last)
		old := last.Value.(*programEntry)
		delete(c.byKey, old.key)
		c.bytes -= int64(old.size)
	}
}

// len reports the number of cached programs.
func (c *programCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

package botapi

import (
	"context"
	"sync"

	"github.com/fhirgate/fhirgate/internal/deploy"
	"github.com/fhirgate/fhirgate/internal/store"
)

// codeCacheSize bounds how many bots' compiled code stays in memory.
const codeCacheSize = 1024

// codeCache keeps bots' compiled code by Binary id, so a run does not read
// and base64-decode it from the store every time. A Binary is never
// rewritten (a deploy makes a new one), so an entry can never be stale.
type codeCache struct {
	mu sync.RWMutex
	m  map[string]string
}

func newCodeCache() *codeCache { return &codeCache{m: make(map[string]string)} }

// executable returns the bot's compiled code and the key naming it.
func (c *codeCache) executable(ctx context.Context, st *store.Store, bot *store.Bot) (code, key string, err error) {
	if bot.ExecutableCode != nil {
		c.mu.RLock()
		code, ok := c.m[bot.ExecutableCode.URL]
		c.mu.RUnlock()
		if ok {
			return code, bot.ExecutableCode.URL, nil
		}
	}
	code, key, err = deploy.Executable(ctx, st, bot)
	if err != nil {
		return "", "", err
	}
	c.mu.Lock()
	if len(c.m) >= codeCacheSize {
		for k := range c.m { // evict an arbitrary entry: map order is random
			delete(c.m, k)
			break
		}
	}
	c.m[bot.ExecutableCode.URL] = code
	c.mu.Unlock()
	return code, bot.ExecutableCode.URL, nil
}

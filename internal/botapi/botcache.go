package botapi

import (
	"sync"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// botCacheSize bounds how many resolved bots stay in memory.
const botCacheSize = 4096

// botInputTypes are the record types a resolved bot is made of: the Bot
// itself, its Project (whose secrets the run receives) and its membership
// (its scope).
var botInputTypes = []string{"Bot", "Project", "ProjectMembership"}

// resolvedBot is what a run needs from the store: the bot, the secrets
// it sees and its membership (nil: it has none). It is shared between
// runs and must not be modified.
type resolvedBot struct {
	bot *store.Bot
	// ref is "Bot/{id}", and self whom the bot acts as when it runs as
	// itself (botIdentity): built once, not on every run. Nothing
	// writes to an Identity once built, so runs share self.
	ref     string
	self    *oauth.Identity
	secrets map[string]botrunner.Secret
	member  *store.ProjectMembership
	changes uint64 // store.Changes(botInputTypes...) before the reads
}

// botCache keeps resolved bots by project and lookup (id or identifier),
// so a run does not read and decode the Bot (through the identifier
// index) and its Project from the store every time: at thousands of runs a
// second those reads were about a sixth of the gateway's CPU. An entry is
// used only while no Bot or Project has been written since it was read
// (store.Changes); bots change rarely, so one write anywhere dropping every
// entry costs nothing that matters.
type botCache struct {
	mu sync.RWMutex
	m  map[botCacheKey]*resolvedBot
}

// botCacheKey names a lookup within a project: by id (byIdentifier false)
// or by "system|value".
type botCacheKey struct {
	project      string
	byIdentifier bool
	key          string
}

func newBotCache() *botCache { return &botCache{m: make(map[botCacheKey]*resolvedBot)} }

// get returns the entry for k if it is still current.
func (c *botCache) get(k botCacheKey, changes uint64) *resolvedBot {
	c.mu.RLock()
	e := c.m[k]
	c.mu.RUnlock()
	if e == nil || e.changes != changes {
		return nil
	}
	return e
}

func (c *botCache) put(k botCacheKey, e *resolvedBot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= botCacheSize {
		for old, v := range c.m { // stale entries first, else an arbitrary one
			if v.changes != e.changes {
				delete(c.m, old)
			}
		}
		for old := range c.m {
			if len(c.m) < botCacheSize {
				break
			}
			delete(c.m, old)
		}
	}
	c.m[k] = e
}

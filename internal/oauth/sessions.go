package oauth

import (
	"sync"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
)

// Defaults for the session cache.
const (
	DefaultSessionCacheTTL = time.Second
	sessionCacheSize       = 16384
)

// sessionCache remembers, per sign-in (login_id), the Login and membership
// Authenticate read, for a short time: a stream of requests with one token
// then costs a map lookup instead of two store reads and JSON decodes each
// (about a fifth of the gateway's CPU per proxied request without it).
//
// An entry is used only while neither record has been written since it was
// read (store.RecordChanges, which counts this process's writes and, on
// PostgreSQL, other replicas' through the change feed): a revocation, a
// replayed refresh token or a membership deactivated through the admin API,
// here or on another replica, acts on the next request. The TTL bounds what
// the counters cannot see (a store written by something else than fhirgate).
type sessionCache struct {
	ttl time.Duration
	now func() time.Time

	mu sync.RWMutex
	m  map[string]sessionEntry
}

type sessionEntry struct {
	login      *store.Login
	membership *store.ProjectMembership
	stamp      uint64 // sessionStamp before the records were read
	expires    time.Time
}

// sessionStamp moves whenever the Login or the membership is written.
func sessionStamp(st *store.Store, loginID, membershipID string) uint64 {
	return st.RecordChanges("Login", loginID) + st.RecordChanges("ProjectMembership", membershipID)
}

// newSessionCache returns a cache, or nil (no caching) for ttl < 0.
func newSessionCache(ttl time.Duration, now func() time.Time) *sessionCache {
	if ttl < 0 {
		return nil
	}
	if ttl == 0 {
		ttl = DefaultSessionCacheTTL
	}
	return &sessionCache{ttl: ttl, now: now, m: make(map[string]sessionEntry)}
}

// get returns the cached records of a sign-in while they are current.
func (c *sessionCache) get(st *store.Store, loginID string) (*store.Login, *store.ProjectMembership, bool) {
	if c == nil {
		return nil, nil, false
	}
	c.mu.RLock()
	e, ok := c.m[loginID]
	c.mu.RUnlock()
	if !ok || !c.now().Before(e.expires) || e.stamp != sessionStamp(st, loginID, e.membership.ID) {
		return nil, nil, false
	}
	return e.login, e.membership, true
}

// put caches a sign-in's records; stamp is sessionStamp taken before each
// was read, so a write landing in between makes the entry stale at once.
func (c *sessionCache) put(l *store.Login, m *store.ProjectMembership, stamp uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= sessionCacheSize {
		now := c.now()
		for k, e := range c.m { // drop what has expired; if nothing has, an arbitrary entry
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
		for k := range c.m {
			if len(c.m) < sessionCacheSize {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[l.ID] = sessionEntry{login: l, membership: m, stamp: stamp, expires: c.now().Add(c.ttl)}
}

// forget drops a sign-in, at once.
func (c *sessionCache) forget(loginID string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.m, loginID)
	c.mu.Unlock()
}

package oauth

import (
	"context"
	"sync"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
)

// readCacheSize bounds the entries of each read cache.
const readCacheSize = 4096

// readCache remembers records the token endpoint reads on every request —
// the client by id, the user by email or id, the user's memberships in the
// client's project or the membership by the provider's subject — so that an exchange with a known identity costs no
// store read. On PostgreSQL each read is a transaction of its own (round
// trips and server CPU); they were most of the gap to Badger's exchange
// rate.
//
// An entry is used only while its stamp, taken from the store's change
// counters before the record was read, has not moved: a write of the
// record here, or on another replica through the change feed (every
// counter moves when the feed reconnects), makes it stale at once, so a
// deactivated client or membership is refused on the next exchange; the
// TTL bounds what the counters cannot see. Cached values are shared and
// must not be changed by their users.
type readCache[K comparable, V any] struct {
	ttl time.Duration
	now func() time.Time

	mu sync.RWMutex
	m  map[K]readEntry[V]
}

type readEntry[V any] struct {
	v       V
	stamp   uint64
	expires time.Time
}

// newReadCache returns a cache, or nil (no caching) for ttl < 0.
func newReadCache[K comparable, V any](ttl time.Duration, now func() time.Time) *readCache[K, V] {
	if ttl < 0 {
		return nil
	}
	if ttl == 0 {
		ttl = DefaultSessionCacheTTL
	}
	return &readCache[K, V]{ttl: ttl, now: now, m: make(map[K]readEntry[V])}
}

// load returns the value for k, from the cache while its stamp is current,
// else from read, which is cached when it succeeds. stamp must move
// whenever what read returns may change; it is taken before read runs, so
// a write landing during the read leaves an entry that is already stale.
func (c *readCache[K, V]) load(ctx context.Context, k K, stamp func() uint64, read func(context.Context) (V, error)) (V, error) {
	if c == nil {
		return read(ctx)
	}
	st := stamp()
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if ok && e.stamp == st && c.now().Before(e.expires) {
		return e.v, nil
	}
	v, err := read(ctx)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if len(c.m) >= readCacheSize {
		clear(c.m) // rare: thousands of clients or users signing in within a TTL
	}
	c.m[k] = readEntry[V]{v: v, stamp: st, expires: c.now().Add(c.ttl)}
	c.mu.Unlock()
	return v, nil
}

// exchangeReads are the token endpoint's cached reads.
type exchangeReads struct {
	clients     *readCache[string, *store.ClientApplication]
	usersByMail *readCache[string, *store.User]
	users       *readCache[string, *store.User]
	memberships *readCache[[2]string, []*store.ProjectMembership]
	bySubject   *readCache[[2]string, *store.ProjectMembership]
}

func newExchangeReads(ttl time.Duration, now func() time.Time) exchangeReads {
	return exchangeReads{
		clients:     newReadCache[string, *store.ClientApplication](ttl, now),
		usersByMail: newReadCache[string, *store.User](ttl, now),
		users:       newReadCache[string, *store.User](ttl, now),
		memberships: newReadCache[[2]string, []*store.ProjectMembership](ttl, now),
		bySubject:   newReadCache[[2]string, *store.ProjectMembership](ttl, now),
	}
}

// client reads a client by id; store.ErrNotFound is not cached.
func (s *Server) client(ctx context.Context, id string) (*store.ClientApplication, error) {
	st := s.o.Store
	return s.reads.clients.load(ctx, id,
		func() uint64 { return st.RecordChanges("ClientApplication", id) },
		func(ctx context.Context) (*store.ClientApplication, error) {
			return store.Get[store.ClientApplication](ctx, st, id)
		})
}

// userByEmail reads the user with an email. Any User write may move an
// address from one user to another, so every one makes entries stale.
func (s *Server) userByEmail(ctx context.Context, email string) (*store.User, error) {
	st := s.o.Store
	return s.reads.usersByMail.load(ctx, email,
		func() uint64 { return st.Changes("User") },
		func(ctx context.Context) (*store.User, error) { return st.UserByEmail(ctx, email) })
}

// membershipsOf reads a user's memberships in a project. A new membership
// is a ProjectMembership write, so every one makes entries stale.
func (s *Server) membershipsOf(ctx context.Context, projectID, userID string) ([]*store.ProjectMembership, error) {
	st := s.o.Store
	return s.reads.memberships.load(ctx, [2]string{projectID, userID},
		func() uint64 { return st.Changes("ProjectMembership") },
		func(ctx context.Context) ([]*store.ProjectMembership, error) {
			return st.MembershipsByProjectUser(ctx, projectID, userID)
		})
}

// user reads a user by id.
func (s *Server) user(ctx context.Context, id string) (*store.User, error) {
	st := s.o.Store
	return s.reads.users.load(ctx, id,
		func() uint64 { return st.RecordChanges("User", id) },
		func(ctx context.Context) (*store.User, error) { return store.Get[store.User](ctx, st, id) })
}

// membershipBySubject reads the project's membership with an externalId.
// Any membership write may give the externalId to another one.
func (s *Server) membershipBySubject(ctx context.Context, projectID, externalID string) (*store.ProjectMembership, error) {
	st := s.o.Store
	return s.reads.bySubject.load(ctx, [2]string{projectID, externalID},
		func() uint64 { return st.Changes("ProjectMembership") },
		func(ctx context.Context) (*store.ProjectMembership, error) {
			return st.MembershipByExternalID(ctx, projectID, externalID)
		})
}

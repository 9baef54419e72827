package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
)

// AuthenticateBasic authenticates a FHIR request that carries
// "Authorization: Basic base64(client_id:secret)", as Medplum does: the
// request is the client's own, with its membership's identity (see
// machine.go). The gate calls it only where `basic_auth` is on.
//
// A hit in the identity cache costs a hash of the header and a map
// lookup, as a bearer check does; an entry lives as long as a session
// cache entry and is dropped at once when this gateway writes a client or
// a membership (rotating a secret, deactivating a client).
func (s *Server) AuthenticateBasic(ctx context.Context, r *http.Request) (*Identity, *AuthError) {
	header := r.Header.Get("Authorization")
	if len(header) > maxBearerBytes || len(r.Header.Values("Authorization")) != 1 {
		s.o.OnAuthFailure("malformed_header")
		return nil, &AuthError{Code: "invalid_request", Description: "malformed Authorization header", Reason: "malformed_header"}
	}
	key := sha256.Sum256([]byte(header))
	changes := s.o.Store.Changes("ClientApplication", "ProjectMembership")
	if id, ok := s.basic.get(key, changes); ok {
		return id, nil
	}
	id, e := s.basicIdentity(ctx, r)
	if e != nil {
		s.o.OnAuthFailure(e.Reason)
		return nil, e
	}
	s.basic.put(key, changes, id)
	return id, nil
}

func (s *Server) basicIdentity(ctx context.Context, r *http.Request) (*Identity, *AuthError) {
	user, pass, ok := basicCredentials(r.Header.Get("Authorization"))
	if !ok || user == "" || pass == "" {
		return nil, &AuthError{Code: "invalid_request", Description: "malformed Basic credentials", Reason: "malformed_header"}
	}
	client, e := s.secretClient(ctx, user, pass)
	if e != nil {
		if e.Status >= 500 {
			return nil, &AuthError{Code: errInvalidToken, Description: "the credentials could not be checked", Reason: "store"}
		}
		return nil, authErr("basic_refused", "the client credentials are not valid")
	}
	m, e := s.machineMembership(ctx, client)
	if e != nil {
		return nil, authErr("membership", "the client has no active membership in its project")
	}
	profile := machineProfile(client, m)
	return &Identity{
		UserID: client.ID, ClientID: client.ID, Scope: grantedMachineScope(client, ""),
		Profile: profile.Reference, ProjectID: m.Meta.Project, MembershipID: m.ID, Admin: m.Admin,
	}, nil
}

// basicCredentials decodes "Basic base64(user:pass)". Medplum's clients
// send the id and secret unescaped.
func basicCredentials(header string) (user, pass string, ok bool) {
	scheme, enc, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(raw), ":")
}

// IsBasic tells whether the request authenticates with the Basic scheme.
func IsBasic(r *http.Request) bool {
	scheme, _, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.EqualFold(scheme, "Basic")
}

// basicCacheSize bounds the Basic identities remembered.
const basicCacheSize = 4096

// basicCache remembers the identity of Basic credentials by a SHA-256 of
// the header (never the header itself), each entry valid until it
// expires or the store's client and membership change counter moves.
type basicCache struct {
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	m  map[[sha256.Size]byte]basicEntry
}

type basicEntry struct {
	id      *Identity
	changes uint64
	expires time.Time
}

// newBasicCache returns a cache, or nil (no caching) for ttl < 0.
func newBasicCache(ttl time.Duration, now func() time.Time) *basicCache {
	if ttl < 0 {
		return nil
	}
	if ttl == 0 {
		ttl = DefaultSessionCacheTTL
	}
	return &basicCache{ttl: ttl, now: now, m: make(map[[sha256.Size]byte]basicEntry)}
}

func (c *basicCache) get(key [sha256.Size]byte, changes uint64) (*Identity, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if !ok || e.changes != changes || !c.now().Before(e.expires) {
		return nil, false
	}
	id := *e.id // callers may not change the cached copy
	return &id, true
}

func (c *basicCache) put(key [sha256.Size]byte, changes uint64, id *Identity) {
	if c == nil {
		return
	}
	cp := *id
	c.mu.Lock()
	if len(c.m) >= basicCacheSize {
		clear(c.m)
	}
	c.m[key] = basicEntry{id: &cp, changes: changes, expires: c.now().Add(c.ttl)}
	c.mu.Unlock()
}

// CarriesOwnToken tells whether any Authorization header of the request
// carries a bearer token this server issued (a JWT naming our issuer,
// whether or not it is still valid). It reads the token's payload without
// verifying it: the question is only whether the header is ours to keep
// from others.
func (s *Server) CarriesOwnToken(r *http.Request) bool {
	for _, v := range r.Header.Values("Authorization") {
		scheme, tok, _ := strings.Cut(v, " ")
		if strings.EqualFold(scheme, "Bearer") && s.isOwnJWT(strings.TrimSpace(tok)) {
			return true
		}
	}
	return false
}

// isOwnJWT tells whether tok is a JWT whose iss is our issuer.
func (s *Server) isOwnJWT(tok string) bool {
	if len(tok) > maxBearerBytes {
		return false
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var c struct {
		Iss string `json:"iss"`
	}
	return json.Unmarshal(payload, &c) == nil && c.Iss == s.o.Tokens.Issuer()
}

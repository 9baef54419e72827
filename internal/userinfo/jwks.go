package userinfo

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// Defaults for the JWKS fields of [Options].
const (
	// DefaultJWKSRefresh is the age after which a key set is fetched again
	// before use; a failed refetch keeps the old set until DefaultJWKSMaxAge.
	DefaultJWKSRefresh = 10 * time.Minute
	// DefaultJWKSMaxAge is how long a key set is used without a successful
	// refetch. Past it, exchanges that need it answer "unavailable".
	DefaultJWKSMaxAge = time.Hour
	// DefaultJWKSMinRefetch is the shortest time between two fetches of one
	// key set, whatever asks for them: an unknown kid, or a failed fetch.
	// Tokens with made-up kids cannot make the gateway hammer the provider.
	DefaultJWKSMinRefetch = 30 * time.Second
)

// jwksKey is one usable verification key of a provider's set.
type jwksKey struct {
	kid string
	alg string // the key's "alg", empty when the JWK names none
	pub crypto.PublicKey
}

// keySet is one provider's keys as last fetched.
type keySet struct {
	keys    []jwksKey
	fetched time.Time
}

// jwksEntry is the cache slot of one jwks_uri. fetchMu lets one fetch run
// at a time, so concurrent exchanges that need one share it; mu guards the
// fields and is never held across a fetch, so tokens whose key is cached
// never wait for one.
type jwksEntry struct {
	fetchMu sync.Mutex
	mu      sync.Mutex
	set     *keySet   // last good set, nil before the first success
	tried   time.Time // last fetch attempt, good or bad
	lastErr error     // the last attempt's failure, nil after a success
}

// jwksCache holds key sets by URI. Entries are never evicted: there is one
// per configured jwks_uri.
type jwksCache struct {
	mu sync.Mutex
	m  map[string]*jwksEntry
}

func (c *jwksCache) entry(uri string) *jwksEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*jwksEntry{}
	}
	e, ok := c.m[uri]
	if !ok {
		e = &jwksEntry{}
		c.m[uri] = e
	}
	return e
}

// cached returns the keys for kid from a set younger than the refresh age.
func (e *jwksEntry) cached(kid string, now time.Time, refresh time.Duration) []jwksKey {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.set != nil && now.Sub(e.set.fetched) < refresh {
		return e.set.match(kid)
	}
	return nil
}

// keysFor returns the keys of uri that may verify a token with this kid:
// the cached set when it is fresh and knows the kid, otherwise the set
// after one refetch (at most one per JWKSMinRefetch). An empty result with
// a nil error means the provider does not publish that kid. The error is an
// [*Error] of KindUnavailable when no usable set can be had.
func (c *Client) keysFor(ctx context.Context, uri, kid string, timeout time.Duration) ([]jwksKey, error) {
	e := c.jwks.entry(uri)
	if ks := e.cached(kid, c.now(), c.jwksRefresh); len(ks) > 0 {
		return ks, nil
	}
	e.fetchMu.Lock()
	defer e.fetchMu.Unlock()
	now := c.now()
	// Another caller may have fetched while this one waited.
	if ks := e.cached(kid, now, c.jwksRefresh); len(ks) > 0 {
		return ks, nil
	}
	e.mu.Lock()
	due := e.tried.IsZero() || now.Sub(e.tried) >= c.jwksMinRefetch
	if due {
		e.tried = now
	}
	e.mu.Unlock()
	if due {
		set, err := c.fetchJWKS(ctx, uri, timeout)
		e.mu.Lock()
		if err == nil {
			set.fetched = now
			e.set = set
		}
		e.lastErr = err
		e.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.set != nil && now.Sub(e.set.fetched) < c.jwksMaxAge:
		if ks := e.set.match(kid); len(ks) > 0 || e.lastErr == nil {
			return ks, nil
		}
		// The kid may be a key the provider rotated in while it is down:
		// that is an outage, not a forged token.
		return nil, &Error{Kind: KindUnavailable, Err: fmt.Errorf("kid not in the cached key set and %w", e.lastErr)}
	case e.lastErr != nil:
		return nil, &Error{Kind: KindUnavailable, Err: e.lastErr}
	default:
		// Past its max age with no failure on record: the refetch that
		// would renew it is not due yet (a clock step back can do this).
		return nil, &Error{Kind: KindUnavailable, Err: errors.New("the cached key set is too old and a refetch is not due yet")}
	}
}

// match returns the keys a token header's kid selects: the key with that
// kid, or every key when the token names none.
func (s *keySet) match(kid string) []jwksKey {
	if kid == "" {
		return s.keys
	}
	for _, k := range s.keys {
		if k.kid == kid {
			return []jwksKey{k}
		}
	}
	return nil
}

// fetchJWKS gets and parses a key set. Every failure is the provider's or
// the network's, so it is an error of KindUnavailable.
func (c *Client) fetchJWKS(ctx context.Context, uri string, timeout time.Duration) (*keySet, error) {
	u, err := url.Parse(uri)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("jwks_uri is not an absolute http or https URL")
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("building JWKS request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "fhirgate")
	c.jwksFetches.Add(1)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching JWKS: %w", transportError(ctx, u, timeout, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		discard(resp.Body)
		return nil, fmt.Errorf("fetching JWKS: unexpected status %d from %s", resp.StatusCode, u.Host)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("fetching JWKS: %w", readError(ctx, timeout, err))
	}
	if int64(len(body)) > c.maxBody {
		return nil, fmt.Errorf("fetching JWKS: body exceeds the %d-byte limit", c.maxBody)
	}
	return parseJWKS(body)
}

// parseJWKS keeps the public signature keys of a set: RSA, EC and Ed25519.
// Symmetric ("oct") keys are never used, so an HMAC token cannot be checked
// with anything the provider published; private parts are dropped.
func parseJWKS(body []byte) (*keySet, error) {
	set, err := jwk.Parse(body)
	if err != nil {
		return nil, fmt.Errorf("parsing JWKS: %w", err)
	}
	out := &keySet{}
	for i := range set.Len() {
		k, _ := set.Key(i)
		if use, ok := k.KeyUsage(); ok && use != "sig" {
			continue
		}
		pk, err := k.PublicKey()
		if err != nil {
			continue
		}
		var raw any
		if err := jwk.Export(pk, &raw); err != nil {
			continue
		}
		// Only these types are kept: an "oct" key exports as []byte and an
		// X25519 key as *ecdh.PublicKey, and both are dropped here.
		switch p := raw.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
		case rsa.PublicKey:
			raw = &p
		case ecdsa.PublicKey:
			raw = &p
		default:
			continue
		}
		key := jwksKey{pub: raw}
		key.kid, _ = k.KeyID()
		if a, ok := k.Algorithm(); ok {
			key.alg = a.String()
		}
		out.keys = append(out.keys, key)
	}
	if len(out.keys) == 0 {
		return nil, errors.New("the JWKS has no RSA, EC or Ed25519 signature key")
	}
	return out, nil
}

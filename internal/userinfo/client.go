package userinfo

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// Defaults for [Options].
const (
	DefaultTimeout   = 5 * time.Second
	DefaultMaxBody   = 1 << 20
	DefaultCacheTTL  = 60 * time.Second
	DefaultCacheSize = 10000
)

// Options configures a [Client]. Zero values mean the documented defaults.
type Options struct {
	// HTTPClient makes the calls. Default: a client with its own pooled
	// transport. A caller's client is copied and its CheckRedirect replaced:
	// the same-host redirect rule is not optional.
	HTTPClient *http.Client
	// DefaultTimeout bounds a whole lookup (connect, TLS, headers, body)
	// when the request sets none. Default DefaultTimeout (5 s).
	DefaultTimeout time.Duration
	// MaxBody is the largest body read, in bytes. Default DefaultMaxBody
	// (1 MiB).
	MaxBody int64
	// DefaultCacheTTL is how long a successful answer is reused when the
	// request sets no TTL. Default DefaultCacheTTL (60 s); negative disables
	// caching.
	DefaultCacheTTL time.Duration
	// CacheSize is roughly how many answers are cached. Default
	// DefaultCacheSize.
	CacheSize int
	// Now is the clock for cache expiry and Retry-After dates; default
	// time.Now. Tests swap it.
	Now func() time.Time
	// Observe, when set, is called once per provider call (not for cache
	// hits or coalesced waiters) with its duration and outcome: "ok",
	// "rejected", "rate_limited" or "unavailable".
	Observe func(d time.Duration, outcome string)
	// JWKSRefresh, JWKSMaxAge and JWKSMinRefetch govern the key sets of
	// [Client.Identify]; defaults DefaultJWKSRefresh, DefaultJWKSMaxAge and
	// DefaultJWKSMinRefetch.
	JWKSRefresh    time.Duration
	JWKSMaxAge     time.Duration
	JWKSMinRefetch time.Duration
	// ClockSkew is the tolerance on a verified token's "exp" and "nbf".
	// Default DefaultClockSkew.
	ClockSkew time.Duration
}

// LookupRequest is one userinfo lookup.
type LookupRequest struct {
	// URL is the provider's userinfo endpoint, http or https.
	URL string
	// Token is the provider's access token, sent as a bearer token.
	Token string
	// CacheKey scopes the cache, e.g. the client id, so two clients never
	// share an answer. The cache key is SHA-256 over CacheKey, URL and
	// Token.
	CacheKey string
	// Timeout bounds this lookup; 0 means Options.DefaultTimeout.
	Timeout time.Duration
	// CacheTTL overrides Options.DefaultCacheTTL; 0 means the default,
	// negative means neither read nor write the cache.
	CacheTTL time.Duration
}

// Info is what the provider said about the token's owner.
type Info struct {
	// Sub is the "sub" claim (a numeric sub is converted to its decimal
	// string).
	Sub string
	// Email is the "email" claim, as sent.
	Email string
	// EmailVerified is "email_verified" (a boolean, or the strings "true" and
	// "false" as Cognito sends them); nil when absent or anything else.
	EmailVerified *bool
	// Raw holds every claim; numbers are json.Number. Each Lookup returns
	// its own copy of the top-level map; nested values are shared with the
	// cache and must not be modified.
	Raw map[string]any
}

// Stats are cumulative counters, for metrics.
type Stats struct {
	// Hits are lookups answered from the cache.
	Hits uint64
	// Misses are lookups that needed a provider answer.
	Misses uint64
	// Calls are provider calls made.
	Calls uint64
	// Coalesced are misses answered by another lookup's provider call.
	Coalesced uint64
	// Verified are subject tokens whose signature verified against a
	// provider's JWKS.
	Verified uint64
	// JWKSFetches are key-set fetches attempted.
	JWKSFetches uint64
}

// Client looks tokens up. It is safe for concurrent use.
type Client struct {
	http       *http.Client
	timeout    time.Duration
	maxBody    int64
	defaultTTL time.Duration
	now        func() time.Time
	observe    func(time.Duration, string)
	cache      *cache
	flights    singleflight.Group

	jwks                                    jwksCache
	jwksRefresh, jwksMaxAge, jwksMinRefetch time.Duration
	skew                                    time.Duration

	hits, misses, calls, coalesced, verified, jwksFetches atomic.Uint64
}

// New returns a Client.
func New(opts Options) *Client {
	c := &Client{
		timeout:    opts.DefaultTimeout,
		maxBody:    opts.MaxBody,
		defaultTTL: opts.DefaultCacheTTL,
		now:        opts.Now,
		observe:    opts.Observe,
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxBody <= 0 {
		c.maxBody = DefaultMaxBody
	}
	if c.defaultTTL == 0 {
		c.defaultTTL = DefaultCacheTTL
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.jwksRefresh = cmp.Or(opts.JWKSRefresh, DefaultJWKSRefresh)
	c.jwksMaxAge = max(cmp.Or(opts.JWKSMaxAge, DefaultJWKSMaxAge), c.jwksRefresh)
	c.jwksMinRefetch = cmp.Or(opts.JWKSMinRefetch, DefaultJWKSMinRefetch)
	c.skew = cmp.Or(opts.ClockSkew, DefaultClockSkew)
	size := opts.CacheSize
	if size <= 0 {
		size = DefaultCacheSize
	}
	c.cache = newCache(size)
	if opts.HTTPClient != nil {
		hc := *opts.HTTPClient
		c.http = &hc
	} else {
		c.http = &http.Client{Transport: newTransport()}
	}
	c.http.CheckRedirect = checkRedirect
	return c
}

func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 16
	t.MaxResponseHeaderBytes = 64 << 10
	return t
}

// Stats returns the counters so far.
func (c *Client) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Calls: c.calls.Load(), Coalesced: c.coalesced.Load(),
		Verified: c.verified.Load(), JWKSFetches: c.jwksFetches.Load()}
}

// Lookup returns what the provider at req.URL says about req.Token, from
// the cache when a fresh answer is there. Errors are [*Error].
//
// Concurrent lookups with the same cache key share one provider call, made
// with the Timeout and CacheTTL of the lookup that started it; each caller
// still stops waiting when its own ctx ends.
func (c *Client) Lookup(ctx context.Context, req LookupRequest) (*Info, error) {
	u, err := checkURL(req.URL)
	if err != nil {
		return nil, &Error{Kind: KindUnavailable, Err: err}
	}
	if err := checkToken(req.Token); err != nil {
		return nil, &Error{Kind: KindRejected, Err: err}
	}
	ttl := req.CacheTTL
	if ttl == 0 {
		ttl = c.defaultTTL
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = c.timeout
	}
	key := cacheKey(req.CacheKey, u.String(), req.Token)
	if ttl > 0 {
		if info, ok := c.cache.get(&key, c.now()); ok {
			c.hits.Add(1)
			return info.clone(), nil
		}
	}

	// The shared call must outlive the caller that started it: other
	// lookups may be waiting on it. It keeps ctx's values, drops its
	// cancellation, and is bounded by the timeout alone.
	led := false
	ch := c.flights.DoChan(string(key[:]), func() (any, error) {
		led = true
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		info, err := c.call(callCtx, u, req.Token, timeout)
		if err != nil {
			return nil, err
		}
		if ttl > 0 {
			c.cache.put(&key, info, c.now().Add(ttl))
		}
		return info, nil
	})
	c.misses.Add(1)
	select {
	case r := <-ch:
		if !led {
			c.coalesced.Add(1)
		}
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*Info).clone(), nil
	case <-ctx.Done():
		return nil, &Error{Kind: KindUnavailable, Err: fmt.Errorf("waiting for userinfo: %w", context.Cause(ctx))}
	}
}

// Forget drops the cached answer for req's client, URL and token, if any.
// A caller uses it when an answer, though well-formed, led to a refusal
// (no such user, unverified email): the next attempt must ask the provider
// again rather than repeat a refusal the provider may since have changed.
func (c *Client) Forget(req LookupRequest) {
	u, err := checkURL(req.URL)
	if err != nil {
		return
	}
	key := cacheKey(req.CacheKey, u.String(), req.Token)
	c.cache.delete(&key)
}

// cacheKey hashes the length-prefixed parts so no two different triples
// collide by shifting bytes between fields.
func cacheKey(scope, rawURL, token string) [32]byte {
	h := sha256.New()
	var n [8]byte
	for _, s := range []string{scope, rawURL, token} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("userinfo URL does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("userinfo URL scheme %q is not http or https", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("userinfo URL has no host")
	}
	if u.User != nil {
		return nil, errors.New("userinfo URL must not carry credentials")
	}
	return u, nil
}

// checkToken accepts the visible ASCII a bearer token can carry (RFC 6750
// b64token and the opaque tokens providers actually issue); anything else
// could split or corrupt the Authorization header.
func checkToken(tok string) error {
	if tok == "" {
		return errors.New("empty token")
	}
	if len(tok) > 16<<10 {
		return errors.New("token longer than 16 KiB")
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < 0x21 || tok[i] > 0x7e {
			return errors.New("token contains characters not allowed in a bearer token")
		}
	}
	return nil
}

func (i *Info) clone() *Info {
	out := *i
	out.Raw = maps.Clone(i.Raw)
	if i.EmailVerified != nil {
		v := *i.EmailVerified
		out.EmailVerified = &v
	}
	return &out
}

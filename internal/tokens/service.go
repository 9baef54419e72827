package tokens

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for [Options].
const (
	// DefaultMaxTokenLifetime covers Medplum's default refresh-token
	// lifetime (2 weeks) plus an hour of margin.
	DefaultMaxTokenLifetime = 14*24*time.Hour + time.Hour
	// DefaultCacheSize is the default number of verified access tokens kept.
	DefaultCacheSize = 10000
	// ClockSkew is how far in the future "iat" and "nbf" may be, to tolerate
	// clocks that differ between replicas. "exp" gets no skew: a token is
	// never accepted after it expires, which is also what the cache honours.
	ClockSkew = 30 * time.Second
)

// Options configures a [Service]. Zero values mean the documented defaults.
type Options struct {
	// Issuer is the "iss" of every token issued and the only one accepted.
	// Required.
	Issuer string
	// Keys persists signing keys. Required.
	Keys KeyStore
	// MaxTokenLifetime bounds every token's lifetime and is how long a
	// retired key keeps verifying. Default DefaultMaxTokenLifetime.
	MaxTokenLifetime time.Duration
	// Now is the clock; default time.Now. Tests swap it.
	Now func() time.Time
	// CacheSize is roughly how many verified access tokens are cached.
	// Default DefaultCacheSize; negative disables the cache.
	CacheSize int
	// KeysChanged, when set, returns a number that moves whenever the
	// stored keys may have changed (the store's change counter of its key
	// records, which on PostgreSQL also counts other replicas' writes).
	// The keys are reloaded on the first use after it moves, so a key
	// another replica created or retired is used here too.
	KeysChanged func() uint64
}

// Service issues and verifies tokens. It is safe for concurrent use.
type Service struct {
	issuer  string
	store   KeyStore
	maxLife time.Duration
	now     func() time.Time
	cache   *verifiedCache // nil when disabled

	mu   sync.Mutex // serialises Rotate and Reload
	ring atomic.Pointer[keyring]
	jwks atomic.Pointer[jwksDoc]

	// sigChecks counts ECDSA verifications; tests use it to prove cache hits.
	sigChecks atomic.Uint64

	// Reloading keys made elsewhere (freshness.go).
	keysChanged      func() uint64
	keysSeen         atomic.Uint64 // keysChanged() at the last reload
	unknownKidReload atomic.Int64  // unix nanoseconds of the last reload for an unknown kid
}

// New loads the keys from opts.Keys. On first start, when the store has no
// usable active key, it generates one and saves it.
func New(ctx context.Context, opts Options) (*Service, error) {
	if opts.Issuer == "" {
		return nil, errors.New("tokens: issuer is required")
	}
	if opts.Keys == nil {
		return nil, errors.New("tokens: key store is required")
	}
	s := &Service{issuer: opts.Issuer, store: opts.Keys, maxLife: opts.MaxTokenLifetime, now: opts.Now, keysChanged: opts.KeysChanged}
	if s.keysChanged != nil {
		// Counted before the keys are read: a change in between reloads.
		s.keysSeen.Store(s.keysChanged())
	}
	if s.maxLife <= 0 {
		s.maxLife = DefaultMaxTokenLifetime
	}
	if s.now == nil {
		s.now = time.Now
	}
	switch {
	case opts.CacheSize == 0:
		s.cache = newVerifiedCache(DefaultCacheSize)
	case opts.CacheSize > 0:
		s.cache = newVerifiedCache(opts.CacheSize)
	}

	keys, err := s.store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("tokens: loading keys: %w", err)
	}
	now := s.now()
	if !hasSigner(keys) {
		k, err := newKey(now)
		if err != nil {
			return nil, fmt.Errorf("tokens: %w", err)
		}
		if err := s.store.Save(ctx, k); err != nil {
			return nil, fmt.Errorf("tokens: saving first key: %w", err)
		}
		keys = append(keys, k)
	}
	ring, err := buildKeyring(keys, now, s.maxLife)
	if err != nil {
		return nil, fmt.Errorf("tokens: loading keys: %w", err)
	}
	s.install(ring)
	return s, nil
}

func hasSigner(keys []Key) bool {
	for _, k := range keys {
		if k.Active && k.Private != nil {
			return true
		}
	}
	return false
}

// Rotate generates a new signing key and retires every key that was active.
// Retired keys keep verifying for MaxTokenLifetime, so live tokens stay
// valid. It works from the store's current content, so a rotation made by
// another replica since the last Reload is not lost. It returns the new key,
// private part included.
func (s *Service) Rotate(ctx context.Context) (Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys, err := s.store.Load(ctx)
	if err != nil {
		return Key{}, fmt.Errorf("tokens: rotating keys: loading: %w", err)
	}
	now := s.now()
	fresh, err := newKey(now)
	if err != nil {
		return Key{}, fmt.Errorf("tokens: rotating keys: %w", err)
	}
	// Save the new key before retiring the old one: if retiring fails, two
	// keys are active and the newer signs, instead of none.
	if err := s.store.Save(ctx, fresh); err != nil {
		return Key{}, fmt.Errorf("tokens: rotating keys: saving new key: %w", err)
	}
	for i, k := range keys {
		if !k.Active {
			continue
		}
		k.Active = false
		k.Retired = now
		if err := s.store.Save(ctx, k); err != nil {
			return Key{}, fmt.Errorf("tokens: rotating keys: retiring key %q: %w", k.ID, err)
		}
		keys[i] = k
	}
	ring, err := buildKeyring(append(keys, fresh), now, s.maxLife)
	if err != nil {
		return Key{}, fmt.Errorf("tokens: rotating keys: %w", err)
	}
	s.install(ring)
	return fresh, nil
}

// Reload re-reads the keys, picking up a rotation made by another replica.
// On error the current keys stay in use.
func (s *Service) Reload(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys, err := s.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("tokens: reloading keys: %w", err)
	}
	ring, err := buildKeyring(keys, s.now(), s.maxLife)
	if err != nil {
		return fmt.Errorf("tokens: reloading keys: %w", err)
	}
	s.install(ring)
	return nil
}

func (s *Service) install(ring *keyring) {
	old := s.ring.Swap(ring)
	// A key removed from the store (e.g. after a compromise) must stop
	// vouching for tokens immediately, cached or not.
	if s.cache != nil && ring.dropsSome(old) {
		s.cache.purge()
	}
	s.jwks.Store(buildJWKS(ring, s.now(), s.maxLife))
}

// SigningKeyID returns the kid of the key that currently signs.
func (s *Service) SigningKeyID() string {
	return s.ring.Load().signer.ID
}

// Issuer returns the configured issuer.
func (s *Service) Issuer() string { return s.issuer }

// MaxTokenLifetime is the longest lifetime a token may be issued with.
func (s *Service) MaxTokenLifetime() time.Duration { return s.maxLife }

// JWKS returns the JSON Web Key Set of the keys that currently verify:
// {"keys":[{"kty":"EC","crv":"P-256","x":…,"y":…,"kid":…,"alg":"ES256","use":"sig"}…]},
// signing key first. Private parts are never included. The bytes are built
// once per key change (and when a retired key's grace period ends) and
// copied out, so the caller may keep or modify them.
func (s *Service) JWKS() []byte {
	s.refreshKeysNow()
	doc := s.jwks.Load()
	ring := s.ring.Load()
	if now := s.now(); doc.ring != ring || !now.Before(doc.until) {
		doc = buildJWKS(ring, now, s.maxLife)
		s.jwks.Store(doc)
	}
	return bytes.Clone(doc.body)
}

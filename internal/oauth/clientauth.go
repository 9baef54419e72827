package oauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"sync"

	"github.com/fhirgate/fhirgate/internal/store"
)

// authenticateClient finds the client and, when it has a secret, checks it
// (the current one or, during a rotation, the retiring one). Medplum does
// no client authentication for token exchange; a client configured with a
// secret here is a confidential client and must use it. A client whose
// status is not active is refused whatever it presents.
func (s *Server) authenticateClient(ctx context.Context, id, secret string) (*store.ClientApplication, *Error) {
	client, e := s.loadClient(ctx, id, secret)
	if e != nil {
		return nil, e
	}
	if client.Secret != "" && !s.secrets.verify(client, secret) {
		return nil, oauthErr(http.StatusUnauthorized, errInvalidClient, "client_secret", "client authentication failed")
	}
	return client, nil
}

// loadClient returns an active client, or invalid_client.
func (s *Server) loadClient(ctx context.Context, id, secret string) (*store.ClientApplication, *Error) {
	client, err := s.client(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		// Spend a hash as for a known client so that response time does not
		// reveal which client ids exist.
		store.VerifySecret(unknownClientHash, secret)
		return nil, oauthErr(http.StatusUnauthorized, errInvalidClient, "unknown_client", "unknown client")
	}
	if err != nil {
		return nil, storeFailure("loading client", err)
	}
	if !client.IsActive() {
		return nil, oauthErr(http.StatusUnauthorized, errInvalidClient, "client_inactive", "the client is not active")
	}
	return client, nil
}

// unknownClientHash is checked against the secret sent for an unknown
// client, to spend the same time as for a known one.
var unknownClientHash = store.HashSecret("fhirgate-unknown-client")

// secretMemoSize bounds the verified secrets remembered.
const secretMemoSize = 4096

// secretMemo remembers secrets that verified against a stored hash, by a
// SHA-256 of both, so that a client signing in on every command (the
// Medplum CLI does) or sending Basic credentials pays the deliberately slow
// hash once. The stored hash carries its salt: a rotated secret has a new
// hash, so nothing verified against the old one is reused for it. Only
// successes are remembered; a wrong secret always pays the hash.
type secretMemo struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]struct{}
}

func newSecretMemo() *secretMemo { return &secretMemo{m: make(map[[sha256.Size]byte]struct{})} }

// verify tells whether secret is the client's secret or its retiring one.
func (sm *secretMemo) verify(c *store.ClientApplication, secret string) bool {
	if secret == "" {
		return false
	}
	return sm.check(c.Secret, secret) || (c.RetiringSecret != "" && sm.check(c.RetiringSecret, secret))
}

func (sm *secretMemo) check(stored, secret string) bool {
	if stored == "" {
		return false
	}
	h := sha256.New()
	h.Write([]byte(stored))
	h.Write([]byte{0})
	h.Write([]byte(secret))
	var k [sha256.Size]byte
	h.Sum(k[:0])
	sm.mu.Lock()
	_, ok := sm.m[k]
	sm.mu.Unlock()
	if ok {
		return true
	}
	if !store.VerifySecret(stored, secret) {
		return false
	}
	sm.mu.Lock()
	if len(sm.m) >= secretMemoSize {
		clear(sm.m) // rare: thousands of distinct client secrets
	}
	sm.m[k] = struct{}{}
	sm.mu.Unlock()
	return true
}

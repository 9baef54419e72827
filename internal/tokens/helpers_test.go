package tokens

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/fakeclock"
)

// memStore is a KeyStore that keeps what a real store would: the JWK fields
// from MarshalJWK plus the lifecycle, serialised, so every test round-trips
// key material through MarshalJWK and KeyFromJWK.
type memStore struct {
	mu      sync.Mutex
	records map[string][]byte
	saves   int
	loads   int
	// changes counts saves, as a store's change counter does.
	changes atomic.Uint64
}

type storedKey struct {
	JWK     map[string]string `json:"jwk"`
	Active  bool              `json:"active"`
	Created time.Time         `json:"created"`
	Retired time.Time         `json:"retired"`
}

func newMemStore() *memStore { return &memStore{records: map[string][]byte{}} }

func (m *memStore) Load(context.Context) ([]Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loads++
	var keys []Key
	for _, id := range slices.Sorted(maps.Keys(m.records)) {
		var r storedKey
		if err := json.Unmarshal(m.records[id], &r); err != nil {
			return nil, err
		}
		k, err := KeyFromJWK(id, r.JWK)
		if err != nil {
			return nil, err
		}
		k.Active, k.Created, k.Retired = r.Active, r.Created, r.Retired
		keys = append(keys, k)
	}
	return keys, nil
}

func (m *memStore) Save(_ context.Context, k Key) error {
	fields, err := k.MarshalJWK()
	if err != nil {
		return err
	}
	b, err := json.Marshal(storedKey{JWK: fields, Active: k.Active, Created: k.Created, Retired: k.Retired})
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records[k.ID] = b
	m.saves++
	m.changes.Add(1)
	return nil
}

func (m *memStore) delete(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.records, id)
	m.changes.Add(1)
}

func (m *memStore) key(t *testing.T, id string) Key {
	t.Helper()
	keys, err := m.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.ID == id {
			return k
		}
	}
	t.Fatalf("key %s not stored", id)
	return Key{}
}

// clock is the Now seam.
type clock = fakeclock.Clock

var newClock = fakeclock.New

const testIssuer = "https://fhir.example.test/"

type env struct {
	svc   *Service
	store *memStore
	clock *clock
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	e := &env{store: newMemStore(), clock: newClock()}
	if opts.Issuer == "" {
		opts.Issuer = testIssuer
	}
	if opts.Keys == nil {
		opts.Keys = e.store
	} else {
		e.store = opts.Keys.(*memStore)
	}
	if opts.Now == nil {
		opts.Now = e.clock.Now
	}
	svc, err := New(context.Background(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.svc = svc
	return e
}

func (e *env) access(t *testing.T, ttl time.Duration) string {
	t.Helper()
	tok, _, err := e.svc.IssueAccess(AccessClaims{
		Sub: "user-1", ClientID: "client-1", LoginID: "login-1",
		Profile: "Practitioner/123", Scope: "openid offline",
	}, ttl)
	if err != nil {
		t.Fatalf("IssueAccess: %v", err)
	}
	return tok
}

// signer returns the private key currently signing.
func (e *env) signer(t *testing.T) Key {
	t.Helper()
	return e.store.key(t, e.svc.SigningKeyID())
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func b64JSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b64(b)
}

// signES256 builds a compact JWS by hand, so tests can sign arbitrary
// headers and claims with a real key.
func signES256(t *testing.T, priv *ecdsa.PrivateKey, hdr, claims any) string {
	t.Helper()
	input := b64JSON(t, hdr) + "." + b64JSON(t, claims)
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, priv, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64(sig)
}

// validClaims are access-token claims acceptable at now.
func validClaims(now time.Time) map[string]any {
	return map[string]any{
		"iss": testIssuer, "sub": "user-1", "aud": "client-1", "client_id": "client-1",
		"login_id": "login-1", "scope": "openid", "iat": now.Unix(), "nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(), "jti": "j1",
	}
}

func accessHeader(kid string) map[string]any {
	return map[string]any{"alg": "ES256", "kid": kid, "typ": "at+jwt"}
}

func decodePart(t *testing.T, tok string, i int) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[i])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func wantReason(t *testing.T, err error, want Reason) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want rejection %q", want)
	}
	var te *Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v is not *tokens.Error", err)
	}
	if te.Reason != want {
		t.Fatalf("reason %q (%v), want %q", te.Reason, err, want)
	}
}

// Package idptest is an external identity provider for tests and the
// harness: signing keys that mint JWTs the way Auth0, Okta or Entra do, and
// an HTTP handler that publishes their JWKS and answers userinfo, counting
// both. It also mints the forgeries a verifier must refuse ("alg": "none",
// HS256 keyed with the public key). Nothing here is used by the gateway.
package idptest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// Key is a provider's signing key.
type Key struct {
	Kid string
	Alg string // RS256, PS256, ES256, ES384 or EdDSA
	// NoAlg leaves "alg" out of the published JWK, as many providers do.
	NoAlg bool
	priv  crypto.Signer
}

// NewKey makes a key for alg: RSA 2048 for RS256 and PS256, P-256 for
// ES256, P-384 for ES384, Ed25519 for EdDSA.
func NewKey(alg, kid string) (*Key, error) {
	var priv crypto.Signer
	var err error
	switch alg {
	case "RS256", "PS256":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ES384":
		priv, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "EdDSA":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, fmt.Errorf("idptest: unsupported alg %s", alg)
	}
	if err != nil {
		return nil, fmt.Errorf("idptest: generating %s key: %w", alg, err)
	}
	return &Key{Kid: kid, Alg: alg, priv: priv}, nil
}

// Sign mints a compact JWS of claims with the key's alg and kid.
func (k *Key) Sign(claims map[string]any) string {
	return k.SignWithHeader(map[string]any{"alg": k.Alg, "kid": k.Kid, "typ": "JWT"}, claims)
}

// SignWithHeader mints a compact JWS with the given protected header,
// signed by the key with its own algorithm whatever the header says.
func (k *Key) SignWithHeader(header, claims map[string]any) string {
	input := encode(header) + "." + encode(claims)
	var sig []byte
	var err error
	switch k.Alg {
	case "RS256":
		d := sha256.Sum256([]byte(input))
		sig, err = rsa.SignPKCS1v15(rand.Reader, k.priv.(*rsa.PrivateKey), crypto.SHA256, d[:])
	case "PS256":
		d := sha256.Sum256([]byte(input))
		sig, err = rsa.SignPSS(rand.Reader, k.priv.(*rsa.PrivateKey), crypto.SHA256, d[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	case "ES256":
		d := sha256.Sum256([]byte(input))
		sig, err = ecdsaSig(k.priv.(*ecdsa.PrivateKey), d[:], 32)
	case "ES384":
		d := sha512.Sum384([]byte(input))
		sig, err = ecdsaSig(k.priv.(*ecdsa.PrivateKey), d[:], 48)
	case "EdDSA":
		sig = ed25519.Sign(k.priv.(ed25519.PrivateKey), []byte(input))
	}
	if err != nil {
		panic(fmt.Sprintf("idptest: signing: %v", err)) // only with a broken rand.Reader
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func ecdsaSig(priv *ecdsa.PrivateKey, digest []byte, size int) ([]byte, error) {
	r, s, err := ecdsa.Sign(rand.Reader, priv, digest)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 2*size)
	r.FillBytes(out[:size])
	s.FillBytes(out[size:])
	return out, nil
}

// PublicDER is the public key as PKIX DER: what an attacker who read the
// JWKS would use as the HMAC secret of an algorithm-confusion forgery.
func (k *Key) PublicDER() []byte {
	der, err := x509.MarshalPKIXPublicKey(k.priv.Public())
	if err != nil {
		panic(fmt.Sprintf("idptest: marshalling public key: %v", err))
	}
	return der
}

// PublicJWK is the public key as a JWK with its kid (and alg unless NoAlg).
func (k *Key) PublicJWK() json.RawMessage {
	key, err := jwk.Import(k.priv.Public())
	if err != nil {
		panic(fmt.Sprintf("idptest: importing public key: %v", err))
	}
	_ = key.Set(jwk.KeyIDKey, k.Kid)
	_ = key.Set(jwk.KeyUsageKey, "sig")
	if !k.NoAlg {
		_ = key.Set(jwk.AlgorithmKey, k.Alg)
	}
	b, err := json.Marshal(key)
	if err != nil {
		panic(fmt.Sprintf("idptest: marshalling JWK: %v", err))
	}
	return b
}

// JWKS is a key set document of the public halves of keys.
func JWKS(keys ...*Key) []byte {
	set := struct {
		Keys []json.RawMessage `json:"keys"`
	}{Keys: []json.RawMessage{}}
	for _, k := range keys {
		set.Keys = append(set.Keys, k.PublicJWK())
	}
	b, _ := json.Marshal(set)
	return b
}

// Edit returns a copy of claims with edits applied: a nil value deletes
// the claim, any other sets it. Tests use it to derive a bad token from a
// good one.
func Edit(claims, edits map[string]any) map[string]any {
	out := make(map[string]any, len(claims)+len(edits))
	for k, v := range claims {
		out[k] = v
	}
	for k, v := range edits {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// HS256 mints an HMAC-SHA256 JWS with secret, e.g. a public key's bytes.
func HS256(secret []byte, kid string, claims map[string]any) string {
	input := encode(map[string]any{"alg": "HS256", "kid": kid, "typ": "JWT"}) + "." + encode(claims)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Unsigned mints an "alg": "none" token.
func Unsigned(kid string, claims map[string]any) string {
	return encode(map[string]any{"alg": "none", "kid": kid, "typ": "JWT"}) + "." + encode(claims) + "."
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("idptest: encoding: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Provider is an identity provider's HTTP face: GET /jwks.json publishes
// the current keys, GET /userinfo answers for the tokens it was told about
// (401 for others). Down makes both answer 503. Safe for concurrent use.
type Provider struct {
	mu       sync.Mutex
	keys     []*Key
	userinfo map[string]string

	// Down, when set, makes every endpoint answer 503.
	Down atomic.Bool
	// JWKSCalls and UserinfoCalls count requests to each endpoint.
	JWKSCalls, UserinfoCalls atomic.Int64
	// UserinfoFunc, when set, answers tokens not in the map: the JSON
	// claims and true, or false for a 401.
	UserinfoFunc func(token string) (string, bool)
}

// NewProvider returns a provider publishing keys.
func NewProvider(keys ...*Key) *Provider {
	return &Provider{keys: keys, userinfo: map[string]string{}}
}

// SetKeys replaces the published keys: a rotation.
func (p *Provider) SetKeys(keys ...*Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = keys
}

// SetUserinfo makes userinfo answer claims (a JSON object) for token.
func (p *Provider) SetUserinfo(token, claims string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.userinfo[token] = claims
}

// ServeHTTP implements http.Handler.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/jwks.json":
		p.JWKSCalls.Add(1)
	case "/userinfo":
		p.UserinfoCalls.Add(1)
	default:
		http.NotFound(w, r)
		return
	}
	if p.Down.Load() {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	p.mu.Lock()
	keys := p.keys
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	claims, ok := p.userinfo[tok]
	p.mu.Unlock()
	if r.URL.Path == "/jwks.json" {
		_, _ = w.Write(JWKS(keys...))
		return
	}
	if !ok && p.UserinfoFunc != nil {
		claims, ok = p.UserinfoFunc(tok)
	}
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_token"}`))
		return
	}
	_, _ = w.Write([]byte(claims))
}

package e2e

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// signingKey returns the stack's active token-signing key, read the way an
// operator could: from a backup taken through the admin API, restored into
// a scratch store. Tests use it to forge tokens that carry a valid
// signature but claims the gateway must still refuse.
func (s *stack) signingKey(t *testing.T) (kid string, priv *ecdsa.PrivateKey) {
	t.Helper()
	resp, err := http.Get("http://" + s.adminAddr + "/fhirgate/backup")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	backup, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("backup: %d %v", resp.StatusCode, err)
	}
	db := storetest.OpenKV(t)
	if err := db.Restore(bytes.NewReader(backup)); err != nil {
		t.Fatal(err)
	}
	keys, err := oauth.KeyStore{Store: store.New(db, store.Options{})}.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Active {
			return k.ID, k.Private
		}
	}
	t.Fatal("the backup holds no active signing key")
	return "", nil
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func b64JSON(t *testing.T, v any) string {
	t.Helper()
	return b64url([]byte(mustJSON(t, v)))
}

// jwtParts decodes a compact JWS's header and claims without verifying.
func jwtParts(t *testing.T, tok string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", tok)
	}
	for i, dst := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || json.Unmarshal(b, dst) != nil {
			t.Fatalf("JWS part %d does not decode", i)
		}
	}
	return header, claims
}

// signES256 signs header.claims with an EC key, as fhirgate does: low-S,
// so that a forged token with the low_s header marker is refused for what
// the test changed, not for its signature's spelling.
func signES256(t *testing.T, priv *ecdsa.PrivateKey, header, claims any) string {
	t.Helper()
	input := b64JSON(t, header) + "." + b64JSON(t, claims)
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, priv, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	if s.Cmp(p256HalfN) > 0 {
		s.Sub(elliptic.P256().Params().N, s)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64url(sig)
}

// signHS256 signs header.claims with HMAC-SHA256 keyed with secret: the
// algorithm-confusion attack when the secret is the server's public key.
func signHS256(t *testing.T, secret []byte, header, claims any) string {
	t.Helper()
	input := b64JSON(t, header) + "." + b64JSON(t, claims)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(input))
	return input + "." + b64url(mac.Sum(nil))
}

// signRS256 signs header.claims with a fresh RSA key.
func signRS256(t *testing.T, header, claims any) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	input := b64JSON(t, header) + "." + b64JSON(t, claims)
	digest := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + b64url(sig)
}

func newECKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// publishedKey is the first key of a JWKS document, as JSON and as the PEM
// of its public key: the two "secrets" an HMAC confusion attack tries.
func publishedKey(t *testing.T, jwks []byte) (jwkJSON, pemKey []byte) {
	t.Helper()
	var doc struct{ Keys []json.RawMessage }
	if err := json.Unmarshal(jwks, &doc); err != nil || len(doc.Keys) == 0 {
		t.Fatalf("JWKS %s", jwks)
	}
	var jwk struct{ X, Y string }
	if err := json.Unmarshal(doc.Keys[0], &jwk); err != nil {
		t.Fatal(err)
	}
	x, errX := base64.RawURLEncoding.DecodeString(jwk.X)
	y, errY := base64.RawURLEncoding.DecodeString(jwk.Y)
	if errX != nil || errY != nil {
		t.Fatalf("JWK coordinates %s", doc.Keys[0])
	}
	pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return doc.Keys[0], pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// withClaims copies claims with some replaced (a nil value deletes).
func withClaims(claims map[string]any, changes map[string]any) map[string]any {
	out := make(map[string]any, len(claims))
	for k, v := range claims {
		out[k] = v
	}
	for k, v := range changes {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

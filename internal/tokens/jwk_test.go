package tokens

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

func TestJWKSPublishesOnlyPublicES256Keys(t *testing.T) {
	e := newEnv(t, Options{})
	doc := e.svc.JWKS()
	var raw struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Keys) != 1 {
		t.Fatalf("%d keys", len(raw.Keys))
	}
	k := raw.Keys[0]
	if got := slices.Sorted(maps.Keys(k)); !slices.Equal(got, []string{"alg", "crv", "kid", "kty", "use", "x", "y"}) {
		t.Fatalf("JWK members %v", got)
	}
	if k["kty"] != "EC" || k["crv"] != "P-256" || k["alg"] != "ES256" || k["use"] != "sig" || k["kid"] != e.svc.SigningKeyID() {
		t.Fatalf("JWK %v", k)
	}
	doc[0] = 'X' // callers get a copy
	if e.svc.JWKS()[0] != '{' {
		t.Fatal("JWKS returned the shared buffer")
	}
}

// A third party holding only the JWKS can verify our access tokens with a
// stock JWT library.
func TestJWKSVerifiesTokensWithJWX(t *testing.T) {
	e := newEnv(t, Options{Now: time.Now})
	tok := e.access(t, time.Hour)
	set, err := jwk.Parse(e.svc.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := jwt.Parse([]byte(tok), jwt.WithKeySet(set), jwt.WithIssuer(testIssuer), jwt.WithAudience("client-1"))
	if err != nil {
		t.Fatalf("jwt.Parse: %v", err)
	}
	if sub, _ := parsed.Subject(); sub != "user-1" {
		t.Fatalf("sub %q", sub)
	}
}

func TestKeyJWKRoundTrip(t *testing.T) {
	k, err := newKey(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	fields, err := k.MarshalJWK()
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(fields)); !slices.Equal(got, []string{"alg", "crv", "d", "kid", "kty", "x", "y"}) {
		t.Fatalf("fields %v", got)
	}
	back, err := KeyFromJWK(k.ID, fields)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != k.ID || !back.Private.Equal(k.Private) {
		t.Fatal("round trip changed the key")
	}
}

func TestKeyFromJWKRejectsBadMaterial(t *testing.T) {
	k, err := newKey(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	good, err := k.MarshalJWK()
	if err != nil {
		t.Fatal(err)
	}
	other, err := newKey(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	otherFields, err := other.MarshalJWK()
	if err != nil {
		t.Fatal(err)
	}
	with := func(changes map[string]string) map[string]string {
		m := maps.Clone(good)
		for name, v := range changes {
			if v == "" {
				delete(m, name)
			} else {
				m[name] = v
			}
		}
		return m
	}
	cases := []struct {
		name   string
		id     string
		fields map[string]string
	}{
		{"empty id", "", good},
		{"RSA", k.ID, with(map[string]string{"kty": "RSA"})},
		{"P-384", k.ID, with(map[string]string{"crv": "P-384"})},
		{"public only", k.ID, with(map[string]string{"d": ""})},
		{"kid mismatch", k.ID, with(map[string]string{"kid": "someone-else"})},
		{"alg RS256", k.ID, with(map[string]string{"alg": "RS256"})},
		{"x/y of another key", k.ID, with(map[string]string{"x": otherFields["x"], "y": otherFields["y"]})},
		{"d not base64", k.ID, with(map[string]string{"d": "!!!"})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := KeyFromJWK(tc.id, tc.fields)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), good["d"]) {
				t.Fatalf("error %q leaks the private key", err)
			}
		})
	}
}

func TestMarshalJWKRejectsOtherCurves(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (Key{ID: "k", Private: priv}).MarshalJWK(); err == nil {
		t.Fatal("P-384 key marshalled")
	}
	if _, err := (Key{ID: "k"}).MarshalJWK(); err == nil {
		t.Fatal("key without private part marshalled")
	}
}

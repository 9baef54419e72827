package e2e

import (
	"crypto/elliptic"
	"encoding/base64"
	"math/big"
	"net/url"
	"strings"
	"testing"
)

// The smaller holes of the hostile-tenant issue that live in tokens and
// sign-in: a second spelling of every ES256 token (s → n − s), and email
// matching that Unicode-folded U+212A KELVIN SIGN onto "k".

var tokensCaddyfile = alphaCaddyfile(`			user kate@a.test {
				profile Practitioner/kate
			}
`, fhirSite(""))

// p256HalfN is ⌊n/2⌋ of P-256: a signature's s is "low" when s ≤ it.
var p256HalfN = new(big.Int).Rsh(elliptic.P256().Params().N, 1)

// sigS returns the s of a compact ES256 token's signature.
func sigS(t *testing.T, tok string) *big.Int {
	t.Helper()
	sig, err := base64.RawURLEncoding.DecodeString(tok[strings.LastIndexByte(tok, '.')+1:])
	if err != nil || len(sig) != 64 {
		t.Fatalf("ES256 signature of %d bytes, %v", len(sig), err)
	}
	return new(big.Int).SetBytes(sig[32:])
}

// flipS returns the token with its signature's s replaced by n − s: the
// other signature ECDSA accepts for the same header and payload.
func flipS(t *testing.T, tok string) string {
	t.Helper()
	dot := strings.LastIndexByte(tok, '.')
	sig, err := base64.RawURLEncoding.DecodeString(tok[dot+1:])
	if err != nil || len(sig) != 64 {
		t.Fatalf("ES256 signature of %d bytes, %v", len(sig), err)
	}
	s := new(big.Int).SetBytes(sig[32:])
	s.Sub(elliptic.P256().Params().N, s).FillBytes(sig[32:])
	return tok[:dot+1] + b64url(sig)
}

func TestHostileTokens(t *testing.T) {
	idp := newIdP(t, map[string]string{
		"kate-token":   `{"sub":"sub-kate","email":"kate@a.test","email_verified":true}`,
		"KATE-token":   `{"sub":"sub-kate","email":"KATE@A.TEST","email_verified":true}`,
		"kelvin-token": `{"sub":"sub-kelvin","email":"\u212Aate@a.test","email_verified":true}`,
	})
	be := newBackend(t)
	s := startStackFrom(t, tokensCaddyfile, faultConfig{stackConfig: stackConfig{IdP: idp.URL, Backend: be.URL}})
	read := func(tok string) response {
		return do(t, "GET", s.gateway+"/fhir/R4/Patient/p1", "", "", "Authorization", "Bearer "+tok)
	}
	wantInvalidToken := func(t *testing.T, r response, what string) {
		t.Helper()
		if r.status != 401 || !strings.Contains(r.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Fatalf("%s: %d %q %s, want 401 invalid_token", what, r.status, r.header.Get("WWW-Authenticate"), r.body)
		}
	}

	t.Run("high-S spelling of an issued token is refused", func(t *testing.T) {
		access := s.signIn(t, "alpha-app", "kate-token")["access_token"].(string)
		// Before and after the genuine spelling is cached.
		before := be.count.Load()
		wantInvalidToken(t, read(flipS(t, access)), "re-spelled token, first use")
		if r := read(access); r.status != 200 {
			t.Fatalf("genuine token: %d %s", r.status, r.body)
		}
		wantInvalidToken(t, read(flipS(t, access)), "re-spelled token after the genuine one was cached")
		if n := be.count.Load() - before; n != 1 {
			t.Fatalf("%d requests reached the backend, want only the genuine one", n)
		}
		if hdr, _ := jwtParts(t, access); hdr["low_s"] != true {
			t.Fatalf("issued token header %v has no low_s marker", hdr)
		}
		if sigS(t, access).Cmp(p256HalfN) > 0 {
			t.Fatal("the gateway issued a high-S signature")
		}
	})

	t.Run("pre-upgrade token: both spellings are one token, revoked stays revoked", func(t *testing.T) {
		issued := s.signIn(t, "alpha-app", "kate-token")["access_token"].(string)
		hdr, claims := jwtParts(t, issued)
		kid, priv := s.signingKey(t)
		// Signed as releases before low-S signing did: no marker.
		old := signES256(t, priv, map[string]any{"alg": "ES256", "kid": kid, "typ": hdr["typ"]}, claims)
		other := flipS(t, old)
		for _, tok := range []string{old, other} {
			if r := read(tok); r.status != 200 {
				t.Fatalf("a pre-upgrade token is refused before it expires: %d %s", r.status, r.body)
			}
		}
		rev := do(t, "POST", s.gateway+"/oauth2/revoke", "application/x-www-form-urlencoded",
			url.Values{"token": {other}, "client_id": {"alpha-app"}}.Encode())
		if rev.status != 200 {
			t.Fatalf("revoke: %d %s", rev.status, rev.body)
		}
		wantInvalidToken(t, read(old), "the other spelling of a revoked token")
		wantInvalidToken(t, read(issued), "the token issued for the revoked sign-in")
	})

	t.Run("an email with U+212A KELVIN SIGN does not sign in as k", func(t *testing.T) {
		r, _, err := s.exchange("alpha-app", "kelvin-token")
		if err != nil {
			t.Fatal(err)
		}
		if r.status != 400 || jsonField(r.body, "error") != "invalid_grant" {
			t.Fatalf("provider vouching for \\u212Aate@a.test: %d %q, want 400 invalid_grant", r.status, jsonField(r.body, "error"))
		}
		for _, exact := range []string{"kate-token", "KATE-token"} {
			if r, _, err := s.exchange("alpha-app", exact); err != nil || r.status != 200 {
				t.Fatalf("%s: %v %d %q", exact, err, r.status, jsonField(r.body, "error_description"))
			}
		}
	})
}

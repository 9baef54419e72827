package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/url"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
)

// flipS returns the token with its ES256 signature's s replaced by n − s:
// the second signature ECDSA accepts for the same header and payload.
func flipS(t *testing.T, tok string) string {
	t.Helper()
	dot := strings.LastIndexByte(tok, '.')
	sig, err := base64.RawURLEncoding.DecodeString(tok[dot+1:])
	if err != nil || len(sig) != 64 {
		t.Fatalf("signature of %d bytes, %v", len(sig), err)
	}
	n := elliptic.P256().Params().N
	s := new(big.Int).SetBytes(sig[32:])
	s.Sub(n, s).FillBytes(sig[32:])
	return tok[:dot+1] + base64.RawURLEncoding.EncodeToString(sig)
}

// preUpgrade re-signs an issued token's payload the way fhirgate signed
// before it signed low-S: a header without the low_s marker, with the
// deployment's own key, so the token is genuine and both of its spellings
// verify.
func (e *env) preUpgrade(t *testing.T, issued, typ string) string {
	t.Helper()
	keys, err := KeyStore{Store: e.st}.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var priv *ecdsa.PrivateKey
	for _, k := range keys {
		if k.ID == e.tok.SigningKeyID() {
			priv = k.Private
		}
	}
	hdr, err := json.Marshal(map[string]string{"alg": "ES256", "kid": e.tok.SigningKeyID(), "typ": typ})
	if err != nil {
		t.Fatal(err)
	}
	input := base64.RawURLEncoding.EncodeToString(hdr) + "." + strings.Split(issued, ".")[1]
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, priv, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// TestRespelledAccessTokenIsRefused: an access token from a real exchange
// with its signature's s flipped is refused as invalid_token, before and
// after the genuine spelling was used.
func TestRespelledAccessTokenIsRefused(t *testing.T) {
	e := newEnv(t)
	access := decode(t, e.exchange("web", "alice"))["access_token"].(string)
	for _, when := range []string{"before", "after"} {
		_, aerr := e.authenticate(flipS(t, access))
		if aerr == nil || aerr.Code != errInvalidToken || aerr.Reason != "signature" {
			t.Fatalf("%s the genuine spelling was used: re-spelled token gave %+v, want invalid_token", when, aerr)
		}
		if _, aerr := e.authenticate(access); aerr != nil {
			t.Fatalf("genuine token: %v", aerr)
		}
	}
}

// TestPreUpgradeTokensRespelledAreTheSameToken: both spellings of a token
// issued before low-S signing are one token to revocation, introspection
// and refresh-token reuse detection, which all key on the token's claims.
func TestPreUpgradeTokensRespelledAreTheSameToken(t *testing.T) {
	t.Run("revoked stays revoked", func(t *testing.T) {
		e := newEnv(t)
		access := e.preUpgrade(t, decode(t, e.exchange("web", "alice"))["access_token"].(string), "at+jwt")
		other := flipS(t, access)
		for _, tok := range []string{access, other} {
			if _, aerr := e.authenticate(tok); aerr != nil {
				t.Fatalf("a pre-upgrade token is refused before it expires: %v", aerr)
			}
		}
		if rec := e.post(e.srv.ServeRevoke, url.Values{"token": {access}}, "", ""); rec.Code != 200 {
			fail(t, rec, "revoke")
		}
		if _, aerr := e.authenticate(other); aerr == nil || aerr.Reason != "revoked" {
			t.Fatalf("the other spelling of a revoked token: %+v", aerr)
		}
		rec := e.post(e.srv.ServeIntrospect, url.Values{"token": {other}, "client_id": {"web"}}, "", "")
		if rec.Code != 200 || decode(t, rec)["active"] != false {
			fail(t, rec, "introspecting the other spelling of a revoked token")
		}
	})
	t.Run("refresh reuse", func(t *testing.T) {
		e := newEnv(t)
		refresh := e.preUpgrade(t, decode(t, e.exchange("web", "alice"))["refresh_token"].(string), "JWT")
		use := func(tok string) int {
			return e.post(e.srv.ServeToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok}, "client_id": {"web"}}, "", "").Code
		}
		if code := use(flipS(t, refresh)); code != 200 {
			t.Fatalf("refresh with a pre-upgrade refresh token: %d", code)
		}
		// The token was used in one spelling; the other is a reuse.
		if code := use(refresh); code != 400 {
			t.Fatalf("the other spelling of a used refresh token: %d", code)
		}
		logins, err := store.Search[store.Login](context.Background(), e.st, store.Filter{})
		if err != nil || len(logins) != 1 || !logins[0].Revoked {
			t.Fatalf("the reuse did not revoke the sign-in: %v %+v", err, logins)
		}
	})
}

package tokens

import (
	"context"
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"
)

func hs256(t *testing.T, secret []byte, hdr, claims any) string {
	t.Helper()
	input := b64JSON(t, hdr) + "." + b64JSON(t, claims)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(input))
	return input + "." + b64(mac.Sum(nil))
}

// TestVerifyRejectsAttacks is the list of forged, broken and misused tokens
// a bearer validator meets; each must fail with the right reason.
func TestVerifyRejectsAttacks(t *testing.T) {
	e := newEnv(t, Options{})
	now := e.clock.Now()
	kid := e.svc.SigningKeyID()
	priv := e.signer(t).Private
	good := e.access(t, time.Hour)
	gp := strings.Split(good, ".")

	pubDER, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	var jwks struct{ Keys []json.RawMessage }
	if err := json.Unmarshal(e.svc.JWKS(), &jwks); err != nil {
		t.Fatal(err)
	}
	pubJWK := []byte(jwks.Keys[0])

	other := newEnv(t, Options{}) // another deployment, same issuer, its own keys
	otherTok := other.access(t, time.Hour)
	op := strings.Split(otherTok, ".")

	wrongIssuer := newEnv(t, Options{Issuer: "https://evil.example/", Keys: e.store})
	wrongIssuerTok := wrongIssuer.access(t, time.Hour)

	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaInput := b64JSON(t, map[string]any{"alg": "RS256", "kid": kid, "typ": "at+jwt"}) + "." + b64JSON(t, validClaims(now))
	digest := sha256.Sum256([]byte(rsaInput))
	rsaSig, err := rsa.SignPKCS1v15(rand.Reader, rsaKey, crypto.SHA256, digest[:])
	if err != nil {
		t.Fatal(err)
	}

	flipped := validClaims(now)
	flipped["sub"] = "admin"

	cases := []struct {
		name  string
		token string
		want  Reason
	}{
		{"empty", "", ReasonMalformed},
		{"garbage", "not a token at all", ReasonMalformed},
		{"two parts", gp[0] + "." + gp[1], ReasonMalformed},
		{"four parts", good + ".x", ReasonMalformed},
		{"JWE-shaped", "a.b.c.d.e", ReasonMalformed},
		{"header not base64url", "%%%." + gp[1] + "." + gp[2], ReasonMalformed},
		{"header not JSON", b64([]byte("hello")) + "." + gp[1] + "." + gp[2], ReasonMalformed},
		{"oversized", b64JSON(t, accessHeader(kid)) + "." + strings.Repeat("A", 9000) + "." + gp[2], ReasonMalformed},
		{"alg none, empty signature", b64JSON(t, map[string]any{"alg": "none", "typ": "at+jwt", "kid": kid}) + "." + b64JSON(t, validClaims(now)) + ".", ReasonAlgorithm},
		{"alg None", b64JSON(t, map[string]any{"alg": "None", "kid": kid}) + "." + gp[1] + ".", ReasonAlgorithm},
		{"no alg", b64JSON(t, map[string]any{"kid": kid, "typ": "at+jwt"}) + "." + gp[1] + "." + gp[2], ReasonAlgorithm},
		{"HS256 keyed with PEM public key", hs256(t, pubPEM, map[string]any{"alg": "HS256", "kid": kid, "typ": "at+jwt"}, validClaims(now)), ReasonAlgorithm},
		{"HS256 keyed with DER public key", hs256(t, pubDER, map[string]any{"alg": "HS256", "kid": kid, "typ": "at+jwt"}, validClaims(now)), ReasonAlgorithm},
		{"HS256 keyed with JWK JSON", hs256(t, pubJWK, map[string]any{"alg": "HS256", "kid": kid, "typ": "at+jwt"}, validClaims(now)), ReasonAlgorithm},
		{"RS256", rsaInput + "." + b64(rsaSig), ReasonAlgorithm},
		{"lowercase es256", signES256(t, priv, map[string]any{"alg": "es256", "kid": kid, "typ": "at+jwt"}, validClaims(now)), ReasonAlgorithm},
		{"ES384 label", signES256(t, priv, map[string]any{"alg": "ES384", "kid": kid, "typ": "at+jwt"}, validClaims(now)), ReasonAlgorithm},
		{"missing kid", signES256(t, priv, map[string]any{"alg": "ES256", "typ": "at+jwt"}, validClaims(now)), ReasonUnknownKey},
		{"unknown kid", signES256(t, priv, accessHeader("00000000-0000-4000-8000-000000000000"), validClaims(now)), ReasonUnknownKey},
		{"another deployment's token", otherTok, ReasonUnknownKey},
		{"another deployment's token relabelled with our kid", b64JSON(t, accessHeader(kid)) + "." + op[1] + "." + op[2], ReasonSignature},
		{"tampered payload", gp[0] + "." + b64JSON(t, flipped) + "." + gp[2], ReasonSignature},
		{"signature of another token", gp[0] + "." + gp[1] + "." + strings.Split(e.access(t, time.Hour), ".")[2], ReasonSignature},
		{"empty signature", gp[0] + "." + gp[1] + ".", ReasonSignature},
		{"truncated signature", gp[0] + "." + gp[1] + "." + gp[2][:40], ReasonSignature},
		{"crit header", signES256(t, priv, map[string]any{"alg": "ES256", "kid": kid, "typ": "at+jwt", "crit": []string{"exp"}}, validClaims(now)), ReasonMalformed},
		{"b64=false header", signES256(t, priv, map[string]any{"alg": "ES256", "kid": kid, "typ": "at+jwt", "b64": false}, validClaims(now)), ReasonMalformed},
		{"payload not JSON", func() string {
			tok := signES256(t, priv, accessHeader(kid), "just a string")
			return tok
		}(), ReasonMalformed},
		{"wrong issuer", wrongIssuerTok, ReasonIssuer},
		{"no typ", signES256(t, priv, map[string]any{"alg": "ES256", "kid": kid}, validClaims(now)), ReasonType},
		{"typ JWT as access", signES256(t, priv, map[string]any{"alg": "ES256", "kid": kid, "typ": "JWT"}, validClaims(now)), ReasonType},
		{"expired", signES256(t, priv, accessHeader(kid), func() map[string]any {
			c := validClaims(now.Add(-2 * time.Hour))
			return c
		}()), ReasonExpired},
		{"nbf in the future", signES256(t, priv, accessHeader(kid), func() map[string]any {
			c := validClaims(now)
			c["nbf"] = now.Add(10 * time.Minute).Unix()
			return c
		}()), ReasonNotYetValid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := e.svc.Verify(context.Background(), tc.token, KindAccess)
			if c != nil {
				t.Errorf("returned claims %+v with the error", c)
			}
			wantReason(t, err, tc.want)
			if len(tc.token) > 20 && strings.Contains(err.Error(), tc.token) {
				t.Errorf("error %q contains the token", err)
			}
		})
	}
	if _, err := e.svc.Verify(context.Background(), good, KindAccess); err != nil {
		t.Fatalf("the genuine token is rejected: %v", err)
	}
}

func TestIssuedTokenExpiresWithTheClock(t *testing.T) {
	e := newEnv(t, Options{CacheSize: -1})
	tok := e.access(t, time.Minute)
	e.clock.Advance(59 * time.Second)
	if _, err := e.svc.Verify(context.Background(), tok, KindAccess); err != nil {
		t.Fatalf("rejected before exp: %v", err)
	}
	e.clock.Advance(time.Second)
	_, err := e.svc.Verify(context.Background(), tok, KindAccess)
	wantReason(t, err, ReasonExpired)
}

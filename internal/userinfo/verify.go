package userinfo

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// DefaultClockSkew is how far "exp" and "nbf" may be off our clock.
const DefaultClockSkew = 30 * time.Second

// JWTCheck says how a provider's signed tokens are verified locally, with
// no call to the provider beyond fetching its keys.
type JWTCheck struct {
	// JWKSURI is where the provider publishes its public keys.
	JWKSURI string
	// Issuer must equal the token's "iss".
	Issuer string
	// Audience: the token's "aud" must contain one of these.
	Audience []string
}

// errNotJWT marks a subject token that is not a compact JWS at all (an
// opaque token, or an encrypted one): it can only be checked at userinfo.
var errNotJWT = errors.New("not a compact JWS")

// allowedAlgs are the asymmetric JWS algorithms accepted from a provider.
// "none" and the HMAC family are absent on purpose: an HS256 token "signed"
// with the provider's public key must never verify.
var allowedAlgs = map[string]jwa.SignatureAlgorithm{
	"RS256": jwa.RS256(), "RS384": jwa.RS384(), "RS512": jwa.RS512(),
	"PS256": jwa.PS256(), "PS384": jwa.PS384(), "PS512": jwa.PS512(),
	"ES256": jwa.ES256(), "ES384": jwa.ES384(), "ES512": jwa.ES512(),
	"EdDSA": jwa.EdDSA(),
}

// jwsHeader is the part of a protected header that is looked at before the
// signature is checked.
type jwsHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

// verifyJWT checks a provider-signed token and returns its claims. It
// returns errNotJWT for a token that is not a compact JWS; every other
// failure is an [*Error]: KindRejected for a token that does not verify,
// KindUnavailable when the provider's keys cannot be had.
func (c *Client) verifyJWT(ctx context.Context, chk *JWTCheck, token string, timeout time.Duration) (*Info, error) {
	h, ok := parseJWSHeader(token)
	if !ok {
		return nil, errNotJWT
	}
	alg, ok := allowedAlgs[h.Alg]
	if !ok {
		return nil, rejected("alg %s is not allowed (want RS*, PS*, ES* or EdDSA)", printable(h.Alg))
	}
	keys, err := c.keysFor(ctx, chk.JWKSURI, h.Kid, timeout)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, rejected("kid %s is not in the provider's key set", printable(h.Kid))
	}
	var payload []byte
	for _, k := range keys {
		if !keyFits(k, h.Alg) {
			continue
		}
		if p, err := jws.VerifyCompactFast(k.pub, []byte(token), alg); err == nil {
			payload = p
			break
		}
	}
	if payload == nil {
		return nil, rejected("signature does not verify with the provider's %s keys", h.Alg)
	}
	c.verified.Add(1)
	claims, err := decodeJSONObject(payload)
	if err != nil {
		return nil, rejected("claims: %v", err)
	}
	if err := c.checkClaims(chk, claims); err != nil {
		return nil, err
	}
	return infoFrom(claims), nil
}

// parseJWSHeader decodes the protected header of something shaped like a
// compact JWS; ok is false for anything else.
func parseJWSHeader(token string) (jwsHeader, bool) {
	var h jwsHeader
	if strings.Count(token, ".") != 2 {
		return h, false
	}
	hb, err := base64.RawURLEncoding.DecodeString(token[:strings.IndexByte(token, '.')])
	if err != nil {
		return h, false
	}
	if err := json.Unmarshal(hb, &h); err != nil || h.Alg == "" {
		return h, false
	}
	return h, true
}

// keyFits tells whether key may verify a token signed with alg: its own
// "alg", when it names one, must be the same, and its type and curve must
// be the ones alg is defined for.
func keyFits(k jwksKey, alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	switch p := k.pub.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		switch alg {
		case "ES256":
			return p.Curve == elliptic.P256()
		case "ES384":
			return p.Curve == elliptic.P384()
		case "ES512":
			return p.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// checkClaims applies the time window, issuer, audience and subject rules
// to a token whose signature verified.
func (c *Client) checkClaims(chk *JWTCheck, claims map[string]any) error {
	now := c.now()
	exp, ok := numericDate(claims["exp"])
	if !ok {
		return rejected("no exp claim")
	}
	if !now.Before(exp.Add(c.skew)) {
		return rejected("token expired")
	}
	if _, present := claims["nbf"]; present {
		nbf, ok := numericDate(claims["nbf"])
		if !ok {
			return rejected("nbf is not a number")
		}
		if now.Add(c.skew).Before(nbf) {
			return rejected("token not valid yet (nbf)")
		}
	}
	if iss, _ := claims["iss"].(string); iss != chk.Issuer {
		return rejected("issuer does not match")
	}
	if !audienceMatches(claims["aud"], chk.Audience) {
		return rejected("audience does not match")
	}
	if sub, _ := claims["sub"].(string); sub == "" {
		return rejected("no sub claim")
	}
	return nil
}

// audienceMatches accepts "aud" as a string or an array of strings (RFC
// 7519 §4.1.3) holding at least one wanted value.
func audienceMatches(aud any, want []string) bool {
	switch v := aud.(type) {
	case string:
		return slices.Contains(want, v)
	case []any:
		for _, a := range v {
			if s, ok := a.(string); ok && slices.Contains(want, s) {
				return true
			}
		}
	}
	return false
}

// numericDate reads a JSON number of seconds since the epoch.
func numericDate(v any) (time.Time, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, false
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e11 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}

func rejected(format string, args ...any) *Error {
	return &Error{Kind: KindRejected, Err: fmt.Errorf(format, args...)}
}

// printable quotes a header value for an error message, shortened, so a
// hostile header cannot flood the logs.
func printable(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return fmt.Sprintf("%q", s)
}

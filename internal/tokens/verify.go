package tokens

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// maxTokenSize bounds the work an attacker can cause before the signature
// check; our tokens are well under 1 KiB.
const maxTokenSize = 8 << 10

// header is the protected JOSE header of a token.
type header struct {
	Alg  string          `json:"alg"`
	Kid  string          `json:"kid"`
	Typ  string          `json:"typ"`
	Crit json.RawMessage `json:"crit"`
	B64  json.RawMessage `json:"b64"`
	// LowS marks a token signed low-S only (see lows.go); a high-S
	// signature on it is refused.
	LowS bool `json:"low_s"`
}

// errHighS refuses the high-S spelling of a token whose signer signs low-S
// only: the signature is mathematically valid, but it is a second spelling
// of a token, which caches and deny lists would take for another token.
var errHighS = reject(ReasonSignature, "high-S signature on a token signed low-S only")

// Verify checks token and returns its claims, or an [*Error] saying why it
// was rejected. It accepts only compact ES256 JWS, signed by a key of this
// deployment that still verifies, with this issuer, a "typ" matching want,
// "exp" in the future and "iat"/"nbf" not beyond ClockSkew in the future.
// "aud" is not checked (it is the client id; the caller compares it when it
// matters).
//
// Access tokens that pass are cached until their "exp", so verifying them
// again is a hash and a map lookup. Verify never checks revocation: callers
// must check the login (Claims.LoginID) after every successful Verify,
// including cache hits. The returned Claims are the caller's to modify.
// ctx bounds the key reload that a change of the stored keys or a token
// with an unknown kid causes.
func (s *Service) Verify(ctx context.Context, token string, want Kind) (*Claims, error) {
	s.refreshKeys(ctx)
	now := s.now()
	if want != KindAccess || s.cache == nil {
		c, err := s.verifyOrReload(ctx, token, want, now)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	// Both spellings of a pre-upgrade token share one entry; a marked
	// token found by its high-S spelling is refused as verify would.
	h, high := canonicalKey(token)
	if c, ok := s.cache.get(&h, now); ok {
		if high && c.lowS {
			return nil, errHighS
		}
		cp := *c
		return &cp, nil
	}
	c, err := s.verifyOrReload(ctx, token, want, now)
	if err != nil {
		return nil, err
	}
	cached := *c
	s.cache.put(&h, &cached, now)
	return c, nil
}

// verifyOrReload is verify, once more after reloading the keys when the
// token's kid is unknown (freshness.go).
func (s *Service) verifyOrReload(ctx context.Context, token string, want Kind, now time.Time) (*Claims, error) {
	c, err := s.verify(token, want, now)
	if ReasonOf(err) == ReasonUnknownKey && s.reloadForUnknownKid(ctx) {
		c, err = s.verify(token, want, now)
	}
	return c, err
}

func (s *Service) verify(token string, want Kind, now time.Time) (*Claims, error) {
	if want < KindAccess || want > KindID {
		return nil, reject(ReasonType, "unknown token kind %d requested", want)
	}
	if token == "" {
		return nil, reject(ReasonMalformed, "empty token")
	}
	if len(token) > maxTokenSize {
		return nil, reject(ReasonMalformed, "token longer than %d bytes", maxTokenSize)
	}
	if strings.Count(token, ".") != 2 {
		return nil, reject(ReasonMalformed, "not a compact JWS (want 3 dot-separated parts)")
	}
	// Every part must be canonical base64url: no padding, no set unused
	// bits. The JWS library decodes leniently, which would give each token
	// dozens of accepted spellings, each its own cache entry.
	for part := range strings.SplitSeq(token, ".") {
		if _, err := base64.RawURLEncoding.Strict().DecodeString(part); err != nil {
			return nil, reject(ReasonMalformed, "a part is not canonical base64url")
		}
	}
	rawHdr := token[:strings.IndexByte(token, '.')]
	hb, err := base64.RawURLEncoding.DecodeString(rawHdr)
	if err != nil {
		return nil, reject(ReasonMalformed, "decoding header: not base64url")
	}
	var h header
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, reject(ReasonMalformed, "decoding header: not a JSON object")
	}
	// The algorithm is pinned before any key is looked up: "none", HMAC keyed
	// with our public key, RSA and every other algorithm-confusion attempt
	// stop here.
	if h.Alg != "ES256" {
		return nil, reject(ReasonAlgorithm, "alg %s not allowed, only ES256", printable(h.Alg))
	}
	if h.Crit != nil || h.B64 != nil {
		return nil, reject(ReasonMalformed, "unsupported header parameter (crit or b64)")
	}
	if h.Kid == "" {
		return nil, reject(ReasonUnknownKey, "no kid in header")
	}
	ring := s.ring.Load()
	key, ok := ring.keys[h.Kid]
	if !ok {
		return nil, reject(ReasonUnknownKey, "kid %s is not a key of this deployment", printable(h.Kid))
	}
	if !key.verifiesAt(now, s.maxLife) {
		return nil, reject(ReasonUnknownKey, "kid %s was retired more than %v ago", printable(h.Kid), s.maxLife)
	}

	if h.LowS {
		// Decoded strictly above; the length is checked by the verifier
		// when it is not 64 bytes.
		sig, _ := base64.RawURLEncoding.DecodeString(token[strings.LastIndexByte(token, '.')+1:])
		if len(sig) == sigSize && highS(sig[32:]) {
			return nil, errHighS
		}
	}

	s.sigChecks.Add(1)
	payload, err := jws.VerifyCompactFast(key.pub, []byte(token), jwa.ES256())
	if err != nil {
		// The cause comes from the library and names neither token part.
		return nil, &Error{Reason: ReasonSignature, Err: err}
	}

	// Everything below is signed by us, so a failure means a token of another
	// kind or time, not a forgery.
	var w wireClaims
	if err := json.Unmarshal(payload, &w); err != nil {
		return nil, reject(ReasonMalformed, "decoding claims: %v", jsonProblem(err))
	}
	if w.Issuer != s.issuer {
		return nil, reject(ReasonIssuer, "issuer does not match")
	}
	if err := checkKind(&h, &w, want); err != nil {
		return nil, err
	}
	if w.ExpiresAt == nil || w.IssuedAt == nil {
		return nil, reject(ReasonMalformed, "exp and iat are required")
	}
	c := &Claims{
		Kind:          want,
		KeyID:         h.Kid,
		ID:            w.ID,
		Issuer:        w.Issuer,
		Subject:       w.Subject,
		Audience:      w.Audience,
		ClientID:      w.ClientID,
		LoginID:       w.LoginID,
		Profile:       w.Profile,
		Scope:         w.Scope,
		Patient:       w.Patient,
		Username:      w.Username,
		Email:         w.Email,
		FHIRUser:      w.FHIRUser,
		Nonce:         w.Nonce,
		RefreshSecret: w.RefreshSecret,
		AuthTime:      w.AuthTime.time(),
		IssuedAt:      w.IssuedAt.time(),
		NotBefore:     w.NotBefore.time(),
		ExpiresAt:     w.ExpiresAt.time(),
		lowS:          h.LowS,
	}
	if !now.Before(c.ExpiresAt) {
		return nil, reject(ReasonExpired, "expired %v ago", now.Sub(c.ExpiresAt).Truncate(time.Second))
	}
	if latest := now.Add(ClockSkew); c.IssuedAt.After(latest) || c.NotBefore.After(latest) {
		return nil, reject(ReasonNotYetValid, "iat or nbf is in the future")
	}
	return c, nil
}

// checkKind keeps tokens in their lane: the header typ separates access
// tokens from the rest, and the claims separate refresh from ID tokens
// (both "JWT", as Medplum issues them).
func checkKind(h *header, w *wireClaims, want Kind) error {
	isAccess := strings.EqualFold(h.Typ, typAccess) || strings.EqualFold(h.Typ, "application/"+typAccess)
	isJWT := strings.EqualFold(h.Typ, typJWT)
	var ok bool
	switch want {
	case KindAccess:
		ok = isAccess
	case KindRefresh:
		ok = isJWT && w.RefreshSecret != "" && w.Subject == ""
	case KindID:
		ok = isJWT && w.RefreshSecret == "" && w.Subject != ""
	}
	if !ok {
		return reject(ReasonType, "not an %s token", want)
	}
	return nil
}

// jsonProblem describes a JSON error without quoting the input.
func jsonProblem(err error) string {
	switch err.(type) {
	case *json.SyntaxError:
		return "invalid JSON"
	case *json.UnmarshalTypeError:
		return "claim of the wrong type"
	}
	return "invalid claim"
}

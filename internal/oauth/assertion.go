package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/store"
)

// Client assertions (private_key_jwt, RFC 7523 §2.2 and OpenID Connect
// Core §9).
const (
	clientAssertionTypeJWT = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
	// maxAssertionLifetime bounds how far in the future an assertion's exp
	// may lie: an assertion is made for one request, and its jti is
	// remembered (in the store) until it expires.
	maxAssertionLifetime = 5 * time.Minute
	// assertionSkew tolerates clocks that disagree a little.
	assertionSkew = 30 * time.Second
	// assertionNamespace is where used jtis are claimed (store.ClaimOnce).
	assertionNamespace = "client-assertion"
)

// jwtBearerUnsupported answers Medplum's jwt-bearer grant. Its assertion is
// HS256 keyed by the client secret, which fhirgate stores only hashed.
const jwtBearerUnsupported = "the jwt-bearer grant is not supported: fhirgate keeps client secrets hashed, " +
	"so it cannot check an assertion keyed by one; sign in with grant_type=client_credentials, " +
	"authenticated by the client secret (client_secret_basic or client_secret_post) or by a client assertion " +
	"signed with the client's private key (private_key_jwt)"

// assertionClient authenticates a client by its signed assertion: a JWT
// whose iss and sub are the client id, aud the issuer or the token
// endpoint, exp at most maxAssertionLifetime away, and a jti not used
// before, signed by a key of the client's key set.
func (s *Server) assertionClient(ctx context.Context, f form) (*store.ClientApplication, *Error) {
	if f["client_assertion_type"] != clientAssertionTypeJWT {
		return nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "client_assertion_type",
			"client_assertion_type must be "+clientAssertionTypeJWT)
	}
	raw := []byte(f["client_assertion"])
	if len(raw) == 0 {
		return nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "client_assertion", "missing client_assertion")
	}
	id := f["client_id"]
	if id == "" {
		// Only to find the client whose keys verify the assertion; the
		// verified iss is checked against it below.
		unverified, err := jwt.ParseInsecure(raw)
		if err != nil {
			return nil, assertionRefused("the client assertion is not a JWT")
		}
		id, _ = unverified.Issuer()
	}
	if id == "" {
		return nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "client_id", "missing client_id")
	}
	client, e := s.loadClient(ctx, id, "")
	if e != nil {
		return nil, e
	}
	if client.JWKSURI == "" && len(client.JWKS) == 0 {
		return nil, oauthErr(http.StatusUnauthorized, errInvalidClient, "client_no_keys",
			"the client has no keys (jwks or jwksUri) to check a client assertion with")
	}
	tok, e := s.verifyAssertion(ctx, client, raw)
	if e != nil {
		return nil, e
	}
	now := s.o.Now()
	exp, ok := tok.Expiration()
	switch {
	case !ok:
		return nil, assertionRefused("the client assertion has no exp")
	case exp.Sub(now) > maxAssertionLifetime+assertionSkew:
		return nil, assertionRefused(fmt.Sprintf("the client assertion lives too long: exp may be at most %s away", maxAssertionLifetime))
	}
	aud, _ := tok.Audience()
	if !slices.ContainsFunc(aud, s.isOwnAudience) {
		return nil, assertionRefused("the client assertion's aud must be the issuer or the token endpoint")
	}
	jti, _ := tok.JwtID()
	if jti == "" {
		return nil, assertionRefused("the client assertion has no jti")
	}
	// Remembered until the assertion expires (with the skew a verifier
	// allows), in the store, so a replay to another replica fails too.
	err := s.o.Store.ClaimOnce(ctx, assertionNamespace, client.ID+"/"+jti, exp.Sub(now)+assertionSkew)
	switch {
	case errors.Is(err, store.ErrConflict):
		return nil, oauthErr(http.StatusUnauthorized, errInvalidClient, "assertion_replayed", "the client assertion was already used")
	case err != nil:
		return nil, storeFailure("recording the client assertion", err)
	}
	return client, nil
}

// verifyAssertion checks the assertion's signature and time claims against
// the client's keys; for keys fetched from jwksUri, a failure refetches
// them once (rate-limited) in case the client rotated its keys.
func (s *Server) verifyAssertion(ctx context.Context, client *store.ClientApplication, raw []byte) (jwt.Token, *Error) {
	for refetch := range 2 {
		set, e := s.clientKeySet(ctx, client, refetch == 1)
		if e != nil {
			return nil, e
		}
		tok, err := jwt.Parse(raw,
			jwt.WithKeySet(set, jws.WithInferAlgorithmFromKey(true), jws.WithRequireKid(false)),
			jwt.WithValidate(true),
			jwt.WithClock(jwt.ClockFunc(s.o.Now)),
			jwt.WithAcceptableSkew(assertionSkew),
			jwt.WithIssuer(client.ID),
			jwt.WithSubject(client.ID),
		)
		if err == nil {
			return tok, nil
		}
		if errors.Is(err, jwt.TokenExpiredError()) {
			return nil, assertionRefused("the client assertion has expired")
		}
		if client.JWKSURI == "" || !s.keys.mayRefetch(client.JWKSURI) || refetch == 1 {
			return nil, assertionRefused("the client assertion does not verify: " + assertionReason(err))
		}
	}
	return nil, assertionRefused("the client assertion does not verify")
}

// assertionReason names what failed without echoing the assertion.
func assertionReason(err error) string {
	switch {
	case errors.Is(err, jwt.InvalidIssuerError()):
		return "iss is not the client id"
	case errors.Is(err, jwt.TokenNotYetValidError()):
		return "not yet valid"
	case errors.Is(err, jwt.InvalidIssuedAtError()):
		return "issued in the future"
	case errors.Is(err, jwt.ValidateError()):
		return "its claims do not validate (sub must be the client id)"
	default:
		return "signature not trusted by the client's keys"
	}
}

func assertionRefused(description string) *Error {
	return oauthErr(http.StatusUnauthorized, errInvalidClient, "client_assertion", description)
}

// isOwnAudience tells whether aud names this server: its issuer or its
// token endpoint.
func (s *Server) isOwnAudience(aud string) bool {
	iss := s.o.Tokens.Issuer()
	base := strings.TrimSuffix(iss, "/")
	return aud == iss || aud == base || aud == base+"/oauth2/token"
}

// clientKeySet returns the client's keys: inline, or fetched from its
// jwksUri (cached; refetched when asked).
func (s *Server) clientKeySet(ctx context.Context, c *store.ClientApplication, refetch bool) (jwk.Set, *Error) {
	if len(c.JWKS) > 0 {
		set, err := jwk.Parse(c.JWKS)
		if err != nil {
			return nil, oauthErr(http.StatusUnauthorized, errInvalidClient, "client_keys", "the client's jwks does not parse")
		}
		return asymmetricKeys(set), nil
	}
	set, err := s.keys.get(ctx, c.JWKSURI, refetch)
	if err != nil {
		s.o.Logger.Debug("client keys not fetched", zap.String("client_id", c.ID), zap.Error(err))
		e := oauthErr(http.StatusServiceUnavailable, errUnavailable, "client_keys_unavailable",
			"the client's keys (jwksUri) could not be fetched; retry later")
		e.RetryAfter = unavailableRetryAfter
		return nil, e
	}
	return set, nil
}

// Bounds of the jwks_uri cache.
const (
	clientKeysTTL          = 5 * time.Minute
	clientKeysMinRefetch   = 30 * time.Second
	clientKeysFetchTimeout = 5 * time.Second
	clientKeysMaxBytes     = 256 << 10
	clientKeysCacheSize    = 1024
)

// clientKeys caches key sets fetched from clients' jwks_uri, for
// clientKeysTTL; a set that fails to verify an assertion may be refetched
// at most every clientKeysMinRefetch, so a stream of bad assertions cannot
// make the gateway hammer the client's server.
type clientKeys struct {
	now    func() time.Time
	client *http.Client

	mu sync.Mutex
	m  map[string]*keySetEntry
}

type keySetEntry struct {
	set     jwk.Set
	fetched time.Time
}

func newClientKeys(now func() time.Time) *clientKeys {
	return &clientKeys{now: now, client: &http.Client{Timeout: clientKeysFetchTimeout}, m: map[string]*keySetEntry{}}
}

// mayRefetch tells whether the set of uri is old enough to be fetched
// again after a failed verification.
func (k *clientKeys) mayRefetch(uri string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.m[uri]
	return e == nil || k.now().Sub(e.fetched) >= clientKeysMinRefetch
}

func (k *clientKeys) get(ctx context.Context, uri string, refetch bool) (jwk.Set, error) {
	k.mu.Lock()
	e := k.m[uri]
	k.mu.Unlock()
	now := k.now()
	if e != nil && now.Sub(e.fetched) < clientKeysTTL && (!refetch || now.Sub(e.fetched) < clientKeysMinRefetch) {
		return e.set, nil
	}
	set, err := k.fetch(ctx, uri)
	if err != nil {
		if e != nil && now.Sub(e.fetched) < clientKeysTTL {
			return e.set, nil // keep what verified before through a blip
		}
		return nil, err
	}
	k.mu.Lock()
	if len(k.m) >= clientKeysCacheSize {
		clear(k.m)
	}
	k.m[uri] = &keySetEntry{set: set, fetched: now}
	k.mu.Unlock()
	return set, nil
}

func (k *clientKeys) fetch(ctx context.Context, uri string) (jwk.Set, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, fmt.Errorf("jwks request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching jwks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching jwks: HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, clientKeysMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading jwks: %w", err)
	}
	if len(body) > clientKeysMaxBytes {
		return nil, fmt.Errorf("jwks larger than %d bytes", clientKeysMaxBytes)
	}
	set, err := jwk.Parse(body)
	if err != nil {
		return nil, fmt.Errorf("parsing jwks: %w", err)
	}
	return asymmetricKeys(set), nil
}

// asymmetricKeys drops symmetric ("oct") keys from a client's key set: a
// private_key_jwt assertion is signed with a private key, and an HMAC key
// published in a key set is no secret.
func asymmetricKeys(set jwk.Set) jwk.Set {
	out := jwk.NewSet()
	for i := range set.Len() {
		if k, ok := set.Key(i); ok && k.KeyType() != jwa.OctetSeq() {
			_ = out.AddKey(k) // keys of a parsed set are valid and distinct
		}
	}
	return out
}

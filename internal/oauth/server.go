package oauth

import (
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
	"github.com/fhirgate/fhirgate/internal/userinfo"
)

// Defaults for Options.
const (
	DefaultAccessTokenTTL  = time.Hour
	DefaultRefreshTokenTTL = 14 * 24 * time.Hour
	// idTokenTTL is fixed, as in Medplum.
	idTokenTTL = time.Hour
	// unavailableRetryAfter is the Retry-After sent when the identity
	// provider is down and it gave no hint of its own.
	unavailableRetryAfter = 5 * time.Second
)

// Grant and token type URNs.
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	grantRefreshToken  = "refresh_token"
	// grantClientCredentials signs a machine in as itself (RFC 6749 §4.4).
	grantClientCredentials = "client_credentials"
	// grantJWTBearer is RFC 7523's assertion grant; Medplum's flavour takes
	// an HS256 assertion keyed by the client secret, which needs the secret
	// in clear: not supported (see jwtBearerUnsupported).
	grantJWTBearer  = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	tokenTypeAccess = "urn:ietf:params:oauth:token-type:access_token"
	defaultScope    = "openid offline"
)

// Options configures a Server. Store, Tokens and UserInfo are required.
type Options struct {
	Store    *store.Store
	Tokens   *tokens.Service
	UserInfo *userinfo.Client

	// AccessTokenTTL is the access-token lifetime unless the client sets
	// its own. Zero means DefaultAccessTokenTTL.
	AccessTokenTTL time.Duration
	// RefreshTokenTTL is the refresh-token (and Login) lifetime unless the
	// client sets its own. Zero means DefaultRefreshTokenTTL.
	RefreshTokenTTL time.Duration

	// SessionCacheTTL is how long Authenticate reuses a sign-in's Login and
	// membership, and the token endpoint a client, a user by email and a
	// user's memberships, before reading them again; a write of any of them
	// through the store (on this replica, or on another one sharing
	// PostgreSQL) takes effect at once regardless. Zero means DefaultSessionCacheTTL;
	// negative disables the cache.
	SessionCacheTTL time.Duration

	// Logger receives security events (never tokens). Nil discards them.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// OnToken observes every token-endpoint answer: the grant type, the
	// client id (only when the client exists, so labels stay bounded) and
	// "ok" or the error code.
	OnToken func(grant, clientID, outcome string)
	// OnAuthFailure observes every rejected bearer token by reason.
	OnAuthFailure func(reason string)
}

// Server answers the OAuth endpoints and authenticates FHIR requests.
type Server struct {
	o        Options
	sessions *sessionCache
	secrets  *secretMemo
	// keys caches the client key sets fetched from jwks_uri.
	keys *clientKeys
	// basic caches identities of Basic credentials (basic.go).
	basic *basicCache
	// reads caches the token endpoint's store reads (readcache.go).
	reads exchangeReads
}

// New returns a Server.
func New(o Options) (*Server, error) {
	if o.Store == nil || o.Tokens == nil || o.UserInfo == nil {
		return nil, errors.New("oauth: Store, Tokens and UserInfo are required")
	}
	if o.AccessTokenTTL <= 0 {
		o.AccessTokenTTL = DefaultAccessTokenTTL
	}
	if o.RefreshTokenTTL <= 0 {
		o.RefreshTokenTTL = DefaultRefreshTokenTTL
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OnToken == nil {
		o.OnToken = func(string, string, string) {}
	}
	if o.OnAuthFailure == nil {
		o.OnAuthFailure = func(string) {}
	}
	return &Server{
		o: o, sessions: newSessionCache(o.SessionCacheTTL, o.Now), secrets: newSecretMemo(),
		keys: newClientKeys(o.Now), basic: newBasicCache(o.SessionCacheTTL, o.Now),
		reads: newExchangeReads(o.SessionCacheTTL, o.Now),
	}, nil
}

// ServeToken is POST /oauth2/token.
func (s *Server) ServeToken(w http.ResponseWriter, r *http.Request) {
	f, e := readForm(r)
	if e != nil {
		s.o.OnToken("", "", e.Code)
		writeError(w, e)
		return
	}
	var resp *tokenResponse
	var client *store.ClientApplication
	grant := f["grant_type"]
	switch grant {
	case "":
		e = oauthErr(http.StatusBadRequest, errInvalidRequest, "grant_type", "missing grant_type")
	case grantTokenExchange:
		resp, client, e = s.exchange(r, f)
	case grantRefreshToken:
		resp, client, e = s.refresh(r, f)
	case grantClientCredentials:
		resp, client, e = s.clientCredentialsGrant(r, f)
	case grantJWTBearer:
		e = oauthErr(http.StatusBadRequest, errUnsupportedGrantType, "grant_type", jwtBearerUnsupported)
	default:
		grant = "other"
		e = oauthErr(http.StatusBadRequest, errUnsupportedGrantType, "grant_type",
			"supported grant types: "+grantTokenExchange+", "+grantRefreshToken+", "+grantClientCredentials)
	}
	clientID := ""
	if client != nil {
		clientID = client.ID
	}
	if e != nil {
		s.o.OnToken(grant, clientID, e.Code)
		s.logRejected(r, grant, clientID, e)
		writeError(w, e)
		return
	}
	s.o.OnToken(grant, clientID, "ok")
	writeJSON(w, http.StatusOK, resp)
}

// logRejected records a refused token request at Debug (it is the client's
// problem), or at Warn when it looks like an attack or an outage.
func (s *Server) logRejected(r *http.Request, grant, clientID string, e *Error) {
	level := zap.DebugLevel
	if e.Reason == "refresh_reuse" || e.Status >= 500 {
		level = zap.WarnLevel
	}
	if ce := s.o.Logger.Check(level, "token request refused"); ce != nil {
		ce.Write(zap.String("grant_type", grant), zap.String("client_id", clientID),
			zap.String("error", e.Code), zap.String("reason", e.Reason), zap.String("remote_ip", r.RemoteAddr),
			zap.NamedError("cause", e.cause))
	}
}

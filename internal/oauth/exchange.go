package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/userinfo"
)

// ExchangeRequest is what both /oauth2/token and the legacy /auth/exchange
// ask for.
type ExchangeRequest struct {
	ClientID     string
	ClientSecret string
	BasicAuth    bool
	SubjectToken string
	Scope        string
	MembershipID string
	RemoteAddr   string
	UserAgent    string
}

// exchange handles grant_type=token-exchange (RFC 8693).
func (s *Server) exchange(r *http.Request, f form) (*tokenResponse, *store.ClientApplication, *Error) {
	id, secret, basic, e := clientCredentials(r, f)
	if e != nil {
		return nil, nil, e
	}
	switch {
	case id == "":
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "client_id", "missing client_id")
	case f["subject_token"] == "":
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "subject_token", "missing subject_token")
	case f["subject_token_type"] != tokenTypeAccess:
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "subject_token_type",
			"subject_token_type must be "+tokenTypeAccess)
	case f["actor_token"] != "" || f["actor_token_type"] != "":
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "actor_token", "delegation (actor_token) is not supported")
	}
	if tt := f["requested_token_type"]; tt != "" && tt != tokenTypeAccess {
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "requested_token_type",
			"only "+tokenTypeAccess+" can be issued")
	}
	return s.Exchange(r.Context(), ExchangeRequest{
		ClientID: id, ClientSecret: secret, BasicAuth: basic,
		SubjectToken: f["subject_token"], Scope: f["scope"], MembershipID: f["membership_id"],
		RemoteAddr: r.RemoteAddr, UserAgent: r.UserAgent(),
	})
}

// Exchange checks an identity provider's access token and issues ours. It
// is shared by the token endpoint and the legacy /auth/exchange.
func (s *Server) Exchange(ctx context.Context, req ExchangeRequest) (*tokenResponse, *store.ClientApplication, *Error) {
	client, e := s.authenticateClient(ctx, req.ClientID, req.ClientSecret)
	if e != nil {
		return nil, nil, e
	}
	idp := client.IdentityProvider
	if idp == nil || idp.UserInfoURL == "" {
		return nil, client, oauthErr(http.StatusBadRequest, errUnauthorizedClient, "no_identity_provider",
			"this client has no identity provider configured for token exchange")
	}
	scope, e := normalizeScope(req.Scope)
	if e != nil {
		return nil, client, e
	}
	info, e := s.lookupUserinfo(ctx, client, req.SubjectToken)
	if e != nil {
		return nil, client, e
	}
	user, membership, e := s.match(ctx, client, info, req.MembershipID)
	if e != nil {
		// Nothing is kept from a refused exchange: the provider is asked
		// again next time, after the operator may have added the user.
		s.o.UserInfo.Forget(s.userinfoRequest(client, req.SubjectToken))
		return nil, client, e
	}
	resp, e := s.signIn(ctx, signIn{
		client: client, user: user, membership: membership, scope: scope,
		remoteAddr: req.RemoteAddr, userAgent: req.UserAgent,
	})
	return resp, client, e
}

// lookupUserinfo asks the client's identity provider who the subject token
// belongs to, mapping each failure to the status the client should see.
func (s *Server) lookupUserinfo(ctx context.Context, client *store.ClientApplication, token string) (*userinfo.Info, *Error) {
	info, err := s.o.UserInfo.Lookup(ctx, s.userinfoRequest(client, token))
	if err == nil {
		return info, nil
	}
	var uerr *userinfo.Error
	if !errors.As(err, &uerr) {
		return nil, unavailable(unavailableRetryAfter, "the identity provider could not be reached")
	}
	switch uerr.Kind {
	case userinfo.KindRejected:
		return nil, oauthErr(http.StatusBadRequest, errInvalidGrant, "subject_token_rejected",
			fmt.Sprintf("the identity provider rejected the subject token (HTTP %d)", uerr.Status))
	case userinfo.KindRateLimited:
		e := oauthErr(http.StatusTooManyRequests, errUnavailable, "idp_rate_limited",
			"the identity provider is rate limiting; retry later")
		e.RetryAfter = max(uerr.RetryAfter, time.Second)
		return nil, e
	default:
		return nil, unavailable(max(uerr.RetryAfter, unavailableRetryAfter), "the identity provider is unavailable; retry later")
	}
}

// userinfoRequest is the userinfo lookup for a client and subject token.
func (s *Server) userinfoRequest(client *store.ClientApplication, token string) userinfo.LookupRequest {
	idp := client.IdentityProvider
	timeout, _ := time.ParseDuration(idp.Timeout)   // validated when stored
	cacheTTL, _ := time.ParseDuration(idp.CacheTTL) // validated when stored
	return userinfo.LookupRequest{
		URL: idp.UserInfoURL, Token: token, CacheKey: client.ID, Timeout: timeout, CacheTTL: cacheTTL,
	}
}

func unavailable(retry time.Duration, description string) *Error {
	e := oauthErr(http.StatusServiceUnavailable, errUnavailable, "idp_unavailable", description)
	e.RetryAfter = retry
	return e
}

// storeFailure reports a store error as a server error. The client learns
// only what failed; the cause goes to the log.
func storeFailure(what string, err error) *Error {
	if errors.Is(err, store.ErrUnwritable) {
		// Disk full or read-only: an outage, not a bad request; existing
		// tokens keep working meanwhile.
		e := unavailable(30*time.Second, what+" failed: the store cannot take writes right now")
		e.Reason, e.cause = "store_unwritable", err
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Code: errServerError, Reason: "store",
		Description: what + " failed", cause: err}
}

// normalizeScope applies the default scope and checks the syntax of each
// scope token (RFC 6749 §3.3).
func normalizeScope(scope string) (string, *Error) {
	fields := strings.Fields(scope)
	if len(fields) == 0 {
		return defaultScope, nil
	}
	for _, tok := range fields {
		for _, c := range tok {
			if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
				return "", oauthErr(http.StatusBadRequest, errInvalidScope, "scope", "scope contains invalid characters")
			}
		}
	}
	return strings.Join(fields, " "), nil
}

// hasScope tells whether a space-separated scope grants one of names.
func hasScope(scope string, names ...string) bool {
	for _, tok := range strings.Fields(scope) {
		for _, n := range names {
			if tok == n {
				return true
			}
		}
	}
	return false
}

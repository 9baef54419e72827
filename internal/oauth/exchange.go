package oauth

import (
	"context"
	"errors"
	"net/http"
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
	// SubjectTokenType is tokenTypeAccess (also when empty) or tokenTypeID.
	SubjectTokenType string
	Scope            string
	MembershipID     string
	RemoteAddr       string
	UserAgent        string
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
	case f["subject_token_type"] != tokenTypeAccess && f["subject_token_type"] != tokenTypeID:
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "subject_token_type",
			"subject_token_type must be "+tokenTypeAccess+" or "+tokenTypeID)
	case f["actor_token"] != "" || f["actor_token_type"] != "":
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "actor_token", "delegation (actor_token) is not supported")
	}
	if tt := f["requested_token_type"]; tt != "" && tt != tokenTypeAccess {
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "requested_token_type",
			"only "+tokenTypeAccess+" can be issued")
	}
	return s.Exchange(r.Context(), ExchangeRequest{
		ClientID: id, ClientSecret: secret, BasicAuth: basic,
		SubjectToken: f["subject_token"], SubjectTokenType: f["subject_token_type"],
		Scope: f["scope"], MembershipID: f["membership_id"],
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
	if idp == nil || (idp.UserInfoURL == "" && idp.JWKSURI == "") {
		return nil, client, oauthErr(http.StatusBadRequest, errUnauthorizedClient, "no_identity_provider",
			"this client has no identity provider configured for token exchange")
	}
	scope, e := grantScope(req.Scope, client)
	if e != nil {
		return nil, client, e
	}
	info, e := s.identify(ctx, client, req.SubjectToken, req.SubjectTokenType == tokenTypeID)
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

package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/userinfo"
)

// tokenTypeID is RFC 8693's type for an OpenID Connect ID token. Access
// tokens of Auth0, Okta and Entra usually carry no email; their ID tokens
// do, so a client may send those instead.
const tokenTypeID = "urn:ietf:params:oauth:token-type:id_token"

// identify asks who the subject token belongs to: by its signature when the
// client's provider has a key set and the token is a JWT with the claims
// the match needs, else at the provider's userinfo endpoint. Each failure
// is mapped to the status the client should see.
func (s *Server) identify(ctx context.Context, client *store.ClientApplication, token string, idToken bool) (*userinfo.Info, *Error) {
	idp := client.IdentityProvider
	if idToken && idp.JWKSURI == "" {
		return nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "subject_token_type",
			"this client's identity provider has no jwks_uri, so it cannot accept ID tokens")
	}
	req := userinfo.IdentifyRequest{Lookup: s.userinfoRequest(client, token), IDToken: idToken, Enough: enoughToMatch(idp)}
	if idp.JWKSURI != "" {
		req.JWT = &userinfo.JWTCheck{JWKSURI: idp.JWKSURI, Issuer: idp.Issuer, Audience: idp.Audience}
	}
	info, err := s.o.UserInfo.Identify(ctx, req)
	if err == nil {
		return info, nil
	}
	var uerr *userinfo.Error
	if !errors.As(err, &uerr) {
		return nil, unavailable(unavailableRetryAfter, "the identity provider could not be reached")
	}
	switch uerr.Kind {
	case userinfo.KindRejected:
		if uerr.Status == 0 {
			// Refused here, by signature or claims: the reason names no
			// part of the token.
			return nil, oauthErr(http.StatusBadRequest, errInvalidGrant, "subject_token_rejected",
				"the subject token was rejected: "+errors.Unwrap(uerr).Error())
		}
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

// enoughToMatch says whether verified claims can be matched without asking
// userinfo: a sub for use-subject clients; otherwise an email, with
// email_verified present unless the client accepts unverified addresses.
func enoughToMatch(idp *store.IdentityProvider) func(*userinfo.Info) bool {
	return func(i *userinfo.Info) bool {
		switch {
		case idp.UseSubject:
			return i.Sub != ""
		case idp.AllowUnverifiedEmail:
			return i.Email != ""
		default:
			return i.Email != "" && i.EmailVerified != nil
		}
	}
}

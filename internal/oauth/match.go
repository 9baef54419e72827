package oauth

import (
	"context"
	"errors"
	"net/http"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/userinfo"
)

// match finds the person the identity provider vouched for, inside the
// client's project only: by email (exactly after ASCII-only lower-casing,
// store.NormalizeEmail, so no Unicode look-alike folds onto an address; the
// provider must have returned one with email_verified true unless the
// client allows unverified addresses), or with
// use-subject by the provider's sub against ProjectMembership.externalId.
func (s *Server) match(ctx context.Context, client *store.ClientApplication, info *userinfo.Info, membershipID string) (*store.User, *store.ProjectMembership, *Error) {
	project := client.Meta.Project
	idp := client.IdentityProvider
	var candidates []*store.ProjectMembership
	var user *store.User

	if idp.UseSubject {
		if info.Sub == "" {
			return nil, nil, oauthErr(http.StatusBadRequest, errInvalidGrant, "no_subject",
				"the identity provider returned no sub claim")
		}
		m, err := s.membershipBySubject(ctx, project, info.Sub)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, noMatch()
		}
		if err != nil {
			return nil, nil, storeFailure("finding membership", err)
		}
		candidates = []*store.ProjectMembership{m}
	} else {
		if info.Email == "" {
			return nil, nil, oauthErr(http.StatusBadRequest, errInvalidGrant, "no_email",
				"the identity provider returned no email")
		}
		// Only a verified address identifies anyone: where the provider
		// lets users type their email (Entra), an unverified one could be
		// anybody's.
		switch {
		case idp.AllowUnverifiedEmail:
		case info.EmailVerified == nil:
			return nil, nil, oauthErr(http.StatusBadRequest, errInvalidGrant, "email_unverified",
				"the identity provider does not say the email is verified (email_verified is absent)")
		case !*info.EmailVerified:
			return nil, nil, oauthErr(http.StatusBadRequest, errInvalidGrant, "email_unverified",
				"the identity provider says the email is not verified")
		}
		u, err := s.userByEmail(ctx, info.Email)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, noMatch()
		}
		if err != nil {
			return nil, nil, storeFailure("finding user", err)
		}
		user = u
		ms, err := s.membershipsOf(ctx, project, u.ID)
		if err != nil {
			return nil, nil, storeFailure("finding membership", err)
		}
		candidates = ms
	}

	m := pickMembership(candidates, membershipID)
	if m == nil {
		return nil, nil, noMatch()
	}
	if !m.IsActive() {
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidGrant, "membership_inactive", "the membership is not active")
	}
	if user == nil {
		u, err := s.user(ctx, refID(m.User.Reference))
		if err != nil {
			return nil, nil, storeFailure("loading user", err)
		}
		user = u
	}
	return user, m, nil
}

// pickMembership takes the requested membership, or the first one, as
// Medplum does for token exchange.
func pickMembership(ms []*store.ProjectMembership, id string) *store.ProjectMembership {
	for _, m := range ms {
		if id == "" || m.ID == id {
			return m
		}
	}
	return nil
}

// noMatch is the same answer for "no such user" and "no membership in this
// project", so the endpoint does not reveal who has an account elsewhere.
func noMatch() *Error {
	return oauthErr(http.StatusBadRequest, errInvalidGrant, "no_match", "no user in this client's project matches the identity")
}

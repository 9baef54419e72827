package oauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
)

// refresh handles grant_type=refresh_token with rotation: every refresh
// returns a new refresh token, and presenting a superseded one revokes the
// whole Login (OAuth 2.0 Security BCP, RFC 9700 §4.14.2), because a replayed
// refresh token means it leaked.
func (s *Server) refresh(r *http.Request, f form) (*tokenResponse, *store.ClientApplication, *Error) {
	ctx := r.Context()
	raw := f["refresh_token"]
	if raw == "" {
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "refresh_token", "missing refresh_token")
	}
	claims, err := s.o.Tokens.Verify(ctx, raw, tokens.KindRefresh)
	if err != nil {
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidGrant, "refresh_invalid", "the refresh token is invalid or expired")
	}
	id, secret, _, e := clientCredentials(r, f)
	if e != nil {
		return nil, nil, e
	}
	if id != "" && id != claims.ClientID {
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidGrant, "client_mismatch", "the refresh token was issued to another client")
	}
	client, e := s.authenticateClient(ctx, claims.ClientID, secret)
	if e != nil {
		return nil, nil, e
	}

	login, err := store.Get[store.Login](ctx, s.o.Store, claims.LoginID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, client, oauthErr(http.StatusBadRequest, errInvalidGrant, "login_gone", "the sign-in has ended")
	}
	if err != nil {
		return nil, client, storeFailure("loading the login", err)
	}
	if login.Revoked {
		return nil, client, oauthErr(http.StatusBadRequest, errInvalidGrant, "login_revoked", "the sign-in was revoked")
	}
	if login.RefreshSecret == "" || subtle.ConstantTimeCompare([]byte(claims.RefreshSecret), []byte(login.RefreshSecret)) != 1 {
		s.revokeLogin(ctx, login)
		s.o.Logger.Warn("refresh token reused; sign-in revoked",
			zap.String("login_id", login.ID), zap.String("client_id", client.ID), zap.String("remote_ip", r.RemoteAddr))
		return nil, client, oauthErr(http.StatusBadRequest, errInvalidGrant, "refresh_reuse",
			"the refresh token was already used; the sign-in is revoked")
	}

	user, membership, e := s.currentMember(ctx, login)
	if e != nil {
		return nil, client, e
	}
	if scope := f["scope"]; scope != "" {
		// A refresh may narrow the scope, never widen it (RFC 6749 §6).
		for _, tok := range strings.Fields(scope) {
			if !hasScope(login.Scope, tok) {
				return nil, client, oauthErr(http.StatusBadRequest, errInvalidScope, "scope_widened",
					"a refresh cannot add scope "+tok)
			}
		}
	}

	accessTTL, refreshTTL := s.lifetimes(client)
	login.RefreshSecret = randomSecret()
	login.RefreshGeneration++
	login.Profile = membership.Profile
	// Optimistic concurrency: two refreshes racing with the same token are
	// a replay; the loser sees a version conflict and is refused.
	if _, err := s.o.Store.Put(ctx, login, store.PutOptions{IfMatch: login.Meta.VersionID, TTL: max(refreshTTL, accessTTL)}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, client, oauthErr(http.StatusBadRequest, errInvalidGrant, "refresh_race", "the refresh token was already used")
		}
		return nil, client, storeFailure("rotating the refresh token", err)
	}
	resp, e := s.issue(login, client, personOf(user), accessTTL, refreshTTL)
	return resp, client, e
}

// currentMember re-reads the Login's user and membership so that a
// deactivated membership stops refreshing.
func (s *Server) currentMember(ctx context.Context, login *store.Login) (*store.User, *store.ProjectMembership, *Error) {
	m, err := store.Get[store.ProjectMembership](ctx, s.o.Store, refID(login.Membership.Reference))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidGrant, "membership_gone", "the membership no longer exists")
	}
	if err != nil {
		return nil, nil, storeFailure("loading the membership", err)
	}
	if !m.IsActive() {
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidGrant, "membership_inactive", "the membership is not active")
	}
	u, err := store.Get[store.User](ctx, s.o.Store, refID(login.User.Reference))
	if err != nil {
		return nil, nil, oauthErr(http.StatusBadRequest, errInvalidGrant, "user_gone", "the user no longer exists")
	}
	return u, m, nil
}

// revokeLogin marks a Login revoked, retrying on concurrent updates. The
// record is kept until it expires so the revocation is remembered.
func (s *Server) revokeLogin(ctx context.Context, login *store.Login) {
	s.sessions.forget(login.ID)
	for range 5 {
		if login.Revoked {
			return
		}
		login.Revoked = true
		login.RefreshSecret = ""
		// A token whose Login is gone is refused too, so the record only has
		// to outlive the default token lifetimes.
		ttl := max(s.o.AccessTokenTTL, s.o.RefreshTokenTTL)
		_, err := s.o.Store.Put(ctx, login, store.PutOptions{IfMatch: login.Meta.VersionID, TTL: ttl})
		if err == nil {
			// Again after the write: a request that read the Login before
			// it may have cached it since.
			s.sessions.forget(login.ID)
			return
		}
		if !errors.Is(err, store.ErrConflict) {
			s.o.Logger.Error("revoking login", zap.String("login_id", login.ID), zap.Error(err))
			return
		}
		fresh, err := store.Get[store.Login](ctx, s.o.Store, login.ID)
		if err != nil {
			return
		}
		login = fresh
	}
}

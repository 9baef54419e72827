package oauth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
)

// tokenResponse is the token endpoint's success body: RFC 6749 / RFC 8693
// fields plus Medplum's project and profile Reference objects.
type tokenResponse struct {
	AccessToken     string           `json:"access_token"`
	IssuedTokenType string           `json:"issued_token_type,omitempty"`
	TokenType       string           `json:"token_type"`
	ExpiresIn       int64            `json:"expires_in"`
	Scope           string           `json:"scope"`
	RefreshToken    string           `json:"refresh_token,omitempty"`
	IDToken         string           `json:"id_token,omitempty"`
	Project         *store.Reference `json:"project,omitempty"`
	Profile         *store.Reference `json:"profile,omitempty"`
	Patient         string           `json:"patient,omitempty"`
}

// signIn is what a new Login is made of.
type signIn struct {
	client     *store.ClientApplication
	user       *store.User
	membership *store.ProjectMembership
	scope      string
	remoteAddr string
	userAgent  string
}

// signIn persists a Login for a matched person and issues its tokens.
func (s *Server) signIn(ctx context.Context, in signIn) (*tokenResponse, *Error) {
	accessTTL, refreshTTL := s.lifetimes(in.client)
	offline := hasScope(in.scope, "offline", "offline_access")
	now := s.o.Now()
	login := &store.Login{
		User:          store.Reference{Reference: "User/" + in.user.ID},
		Membership:    store.Reference{Reference: "ProjectMembership/" + in.membership.ID},
		Client:        &store.Reference{Reference: "ClientApplication/" + in.client.ID},
		Project:       &store.Reference{Reference: "Project/" + in.client.Meta.Project},
		Profile:       in.membership.Profile,
		AuthMethod:    "exchange",
		AuthTime:      now.UTC().Format(time.RFC3339),
		Scope:         in.scope,
		Granted:       true,
		RemoteAddress: in.remoteAddr,
		UserAgent:     in.userAgent,
	}
	login.Meta.Project = in.client.Meta.Project
	ttl := accessTTL
	if offline {
		login.RefreshSecret = randomSecret()
		ttl = max(refreshTTL, accessTTL)
	}
	if err := s.o.Store.Create(ctx, login, store.PutOptions{TTL: ttl}); err != nil {
		return nil, storeFailure("recording the login", err)
	}
	resp, e := s.issue(login, in.client, personOf(in.user), accessTTL, refreshTTL)
	if e != nil {
		return nil, e
	}
	resp.IssuedTokenType = tokenTypeAccess
	return resp, nil
}

// principal is whom a token's sub names: a User, or a ClientApplication
// signed in as itself (no email).
type principal struct {
	id, email string
}

func personOf(u *store.User) principal { return principal{id: u.ID, email: u.Email} }

// issue signs the tokens of a Login.
func (s *Server) issue(login *store.Login, client *store.ClientApplication, user principal, accessTTL, refreshTTL time.Duration) (*tokenResponse, *Error) {
	profile := ""
	if login.Profile != nil {
		profile = login.Profile.Reference
	}
	email := ""
	if hasScope(login.Scope, "email") {
		email = user.email
	}
	access, _, err := s.o.Tokens.IssueAccess(tokens.AccessClaims{
		Sub: user.id, ClientID: client.ID, LoginID: login.ID, Profile: profile, Scope: login.Scope, Email: email,
	}, accessTTL)
	if err != nil {
		return nil, signingFailure(err)
	}
	resp := &tokenResponse{
		AccessToken: access,
		TokenType:   "Bearer",
		ExpiresIn:   int64(accessTTL / time.Second),
		Scope:       login.Scope,
		Project:     login.Project,
		Profile:     login.Profile,
	}
	if id, ok := strings.CutPrefix(profile, "Patient/"); ok {
		resp.Patient = id
	}
	if login.RefreshSecret != "" {
		resp.RefreshToken, _, err = s.o.Tokens.IssueRefresh(tokens.RefreshClaims{
			ClientID: client.ID, LoginID: login.ID, RefreshSecret: login.RefreshSecret,
		}, refreshTTL)
		if err != nil {
			return nil, signingFailure(err)
		}
	}
	if hasScope(login.Scope, "openid") {
		authTime, _ := time.Parse(time.RFC3339, login.AuthTime)
		resp.IDToken, _, err = s.o.Tokens.IssueID(tokens.IDClaims{
			Sub: user.id, ClientID: client.ID, LoginID: login.ID, FHIRUser: profile, Email: email, AuthTime: authTime,
		}, idTokenTTL)
		if err != nil {
			return nil, signingFailure(err)
		}
	}
	return resp, nil
}

func signingFailure(err error) *Error {
	return &Error{Status: http.StatusInternalServerError, Code: errServerError, Reason: "signing",
		Description: "signing the token failed", cause: err}
}

// lifetimes returns the client's token lifetimes, falling back to the
// server's, capped at the longest lifetime the token service issues (a
// retired signing key verifies only that long): a client configured longer
// gets the cap rather than a failed exchange. Lifetimes use Medplum's
// format, validated when the client is stored.
func (s *Server) lifetimes(c *store.ClientApplication) (access, refresh time.Duration) {
	access, refresh = s.o.AccessTokenTTL, s.o.RefreshTokenTTL
	if d, ok := parseLifetime(c.AccessTokenLifetime); ok {
		access = d
	}
	if d, ok := parseLifetime(c.RefreshTokenLifetime); ok {
		refresh = d
	}
	limit := s.o.Tokens.MaxTokenLifetime()
	return min(access, limit), min(refresh, limit)
}

// maxLifetime bounds a client's configured token lifetime.
const maxLifetime = 100 * 365 * 24 * time.Hour

// parseLifetime reads Medplum's token lifetime syntax ("3600s", "1h",
// "2w") with the store's parser; zero or absurdly long lifetimes fall back
// to the server's.
func parseLifetime(s string) (time.Duration, bool) {
	d, err := store.ParseLifetime(s)
	if err != nil || d <= 0 || d > maxLifetime {
		return 0, false
	}
	return d, true
}

// randomSecret is a refresh secret: 32 random bytes, hex, as Medplum's.
func randomSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// refID returns the id part of a "Type/id" reference.
func refID(ref string) string {
	_, id, _ := strings.Cut(ref, "/")
	return id
}

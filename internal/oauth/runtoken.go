package oauth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
)

// ErrNoSignIn is IssueRunToken's answer for an identity that has no sign-in of its own (a bot
// running as itself, a scheduled run): there is no Login to derive a token from.
var ErrNoSignIn = errors.New("the run's identity has no sign-in to issue a token for")

// IssueRunToken signs an access token for a bot run made as id (Medplum's getAccessToken in a
// bot): a new Login with the user, membership, client, profile and scope of id's own sign-in and
// Medplum's authMethod "execute", living at most ttl. The returned revoke ends it — the run calls
// it when it ends, so the token is refused from then on, here and on other replicas (the session
// cache sees the write at once).
func (s *Server) IssueRunToken(ctx context.Context, id *Identity, ttl time.Duration) (string, func(context.Context), error) {
	if id == nil || id.LoginID == "" {
		return "", nil, ErrNoSignIn
	}
	if ttl <= 0 {
		return "", nil, errors.New("the run has no time left")
	}
	parent, err := store.Get[store.Login](ctx, s.o.Store, id.LoginID)
	if err != nil {
		return "", nil, fmt.Errorf("reading the run's sign-in: %w", err)
	}
	if parent.Revoked {
		return "", nil, errors.New("the run's sign-in was revoked")
	}
	login := &store.Login{
		User:       parent.User,
		Membership: parent.Membership,
		Client:     parent.Client,
		Project:    parent.Project,
		Profile:    parent.Profile,
		AuthMethod: "execute",
		AuthTime:   s.o.Now().UTC().Format(time.RFC3339),
		Scope:      id.Scope,
		Granted:    true,
	}
	login.Meta.Project = parent.Meta.Project
	// A whole second at least: the token's exp has second precision.
	ttl = max(ttl, time.Second)
	if err := s.o.Store.Create(ctx, login, store.PutOptions{TTL: ttl}); err != nil {
		return "", nil, fmt.Errorf("recording the run's sign-in: %w", err)
	}
	client := ""
	if login.Client != nil {
		client = refID(login.Client.Reference)
	}
	profile := ""
	if login.Profile != nil {
		profile = login.Profile.Reference
	}
	access, _, err := s.o.Tokens.IssueAccess(tokens.AccessClaims{
		Sub: refID(login.User.Reference), ClientID: client, LoginID: login.ID, Profile: profile, Scope: id.Scope,
		Patient: id.Patient,
	}, ttl)
	if err != nil {
		s.revokeLogin(ctx, login)
		return "", nil, fmt.Errorf("signing the run's token: %w", err)
	}
	return access, func(ctx context.Context) { s.revokeLogin(ctx, login) }, nil
}

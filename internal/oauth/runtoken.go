package oauth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
)

// ErrNoSignIn is IssueRunToken's answer for an identity that has neither a sign-in of its own
// nor a bot to act as: there is no Login to derive a token from.
var ErrNoSignIn = errors.New("the run's identity has no sign-in to issue a token for")

// IssueRunToken signs an access token for a bot run made as id (Medplum's getAccessToken in a
// bot): a new Login with the user, membership, client, profile and scope of id's own sign-in and
// Medplum's authMethod "execute", living at most ttl. The returned revoke ends it — the run calls
// it when it ends, so the token is refused from then on, here and on other replicas (the session
// cache sees the write at once). A run made as the bot itself (no sign-in, profile Bot/{id}) gets
// a Login whose user is the bot: see botRunLogin.
func (s *Server) IssueRunToken(ctx context.Context, id *Identity, ttl time.Duration) (string, func(context.Context), error) {
	if id == nil {
		return "", nil, ErrNoSignIn
	}
	if ttl <= 0 {
		return "", nil, errors.New("the run has no time left")
	}
	if id.LoginID == "" {
		login, err := botRunLogin(id)
		if err != nil {
			return "", nil, err
		}
		login.AuthTime = s.o.Now().UTC().Format(time.RFC3339)
		return s.issueRunLogin(ctx, login, id, ttl)
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
	return s.issueRunLogin(ctx, login, id, ttl)
}

// issueRunLogin records a run's Login, living at most ttl, and signs its access token.
func (s *Server) issueRunLogin(ctx context.Context, login *store.Login, id *Identity, ttl time.Duration) (string, func(context.Context), error) {
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

// botRunLogin is the Login of a run made as the bot itself (Medplum's default; every scheduled or
// triggered run), as Medplum signs bots in: user and profile Bot/{id} in the bot's project, its
// membership and scope when it has one, else no membership — Authenticate then grants the
// project's full access, as the run itself has (botapi's botIdentity).
func botRunLogin(id *Identity) (*store.Login, error) {
	botID, ok := strings.CutPrefix(id.Profile, "Bot/")
	if !ok || botID == "" || id.UserID != "" || id.ProjectID == "" {
		return nil, ErrNoSignIn
	}
	login := &store.Login{
		User:       store.Reference{Reference: id.Profile},
		Project:    &store.Reference{Reference: "Project/" + id.ProjectID},
		Profile:    &store.Reference{Reference: id.Profile},
		AuthMethod: "execute",
		Scope:      id.Scope,
		Granted:    true,
	}
	if id.MembershipID != "" {
		login.Membership = store.Reference{Reference: "ProjectMembership/" + id.MembershipID}
	}
	login.Meta.Project = id.ProjectID
	return login, nil
}

// isBotLogin tells a bot run's Login (botRunLogin) from a person's or a client's.
func isBotLogin(login *store.Login) bool {
	return strings.HasPrefix(login.User.Reference, "Bot/")
}

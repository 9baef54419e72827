package oauth

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
)

// A machine — a CI job, a lab integration, the Medplum CLI — signs in as a
// ClientApplication with grant_type=client_credentials, authenticated by
// its secret (HTTP Basic or client_secret in the form) or by a client
// assertion signed with its key (private_key_jwt). Its identity is its own
// membership in its project: a ProjectMembership whose user is
// ClientApplication/{id} (admin or not as that membership says), with the
// profile ClientApplication/{id} unless the membership names another. As in
// Medplum, no refresh token is issued: the machine signs in again, and each
// sign-in's Login expires with its access token, so a client that signs in
// on every command leaves nothing behind.

// clientCredentialsGrant handles grant_type=client_credentials.
func (s *Server) clientCredentialsGrant(r *http.Request, f form) (*tokenResponse, *store.ClientApplication, *Error) {
	ctx := r.Context()
	client, e := s.authenticateMachine(ctx, r, f)
	if e != nil {
		return nil, client, e
	}
	scope, e := normalizeScope(f["scope"])
	if e != nil {
		return nil, client, e
	}
	// No refresh token is issued, so offline access is not granted.
	scope = withoutScopes(scope, "offline", "offline_access")
	m, e := s.machineMembership(ctx, client)
	if e != nil {
		return nil, client, e
	}
	accessTTL, _ := s.lifetimes(client)
	login := &store.Login{
		User:          store.Reference{Reference: "ClientApplication/" + client.ID},
		Membership:    store.Reference{Reference: "ProjectMembership/" + m.ID},
		Client:        &store.Reference{Reference: "ClientApplication/" + client.ID},
		Project:       s.projectRef(ctx, client.Meta.Project),
		Profile:       machineProfile(client, m),
		AuthMethod:    "client_credentials",
		AuthTime:      s.o.Now().UTC().Format(time.RFC3339),
		Scope:         grantedMachineScope(client, scope),
		Granted:       true,
		RemoteAddress: r.RemoteAddr,
		UserAgent:     r.UserAgent(),
	}
	login.Meta.Project = client.Meta.Project
	if err := s.o.Store.Create(ctx, login, store.PutOptions{TTL: accessTTL}); err != nil {
		return nil, client, storeFailure("recording the login", err)
	}
	resp, e := s.issue(login, client, principal{id: client.ID}, accessTTL, 0)
	return resp, client, e
}

// grantedMachineScope is THE place where the scope a machine sign-in
// (client_credentials or Basic) is granted is computed. Today it grants
// the scope asked for (default "openid offline" for token requests), and
// the machine has its membership's full access; authorization by scope
// (ClientApplication.scope, SMART scopes) is to narrow it here: requested ∩
// the client's allowed, full project access when neither is given.
func grantedMachineScope(_ *store.ClientApplication, requested string) string {
	return requested
}

// authenticateMachine authenticates the client of a client_credentials
// request: by assertion when one is sent, else by secret. A client without
// a secret cannot sign in with one.
func (s *Server) authenticateMachine(ctx context.Context, r *http.Request, f form) (*store.ClientApplication, *Error) {
	if f["client_assertion"] != "" || f["client_assertion_type"] != "" {
		if _, _, ok := r.BasicAuth(); ok {
			return nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "client_auth",
				"use one client authentication method, not Basic and a client assertion")
		}
		return s.assertionClient(ctx, f)
	}
	id, secret, e := machineCredentials(r, f)
	if e != nil {
		return nil, e
	}
	return s.secretClient(ctx, id, secret)
}

// secretClient authenticates a machine by its client id and secret.
func (s *Server) secretClient(ctx context.Context, id, secret string) (*store.ClientApplication, *Error) {
	client, e := s.loadClient(ctx, id, secret)
	if e != nil {
		return nil, e
	}
	if client.Secret == "" {
		return client, oauthErr(http.StatusUnauthorized, errInvalidClient, "client_no_secret",
			"the client has no secret: it cannot sign in with one (give it a secret, or keys for private_key_jwt)")
	}
	if !s.secrets.verify(client, secret) {
		return client, oauthErr(http.StatusUnauthorized, errInvalidClient, "client_secret", "client authentication failed")
	}
	return client, nil
}

// machineCredentials returns the client id and secret of a
// client_credentials request. The Medplum client sends them both ways at
// once (Basic and in the form); they must then agree.
func machineCredentials(r *http.Request, f form) (id, secret string, e *Error) {
	id, secret, basic, e := clientCredentials(r, f)
	if e != nil {
		return "", "", e
	}
	if basic && f["client_secret"] != "" && f["client_secret"] != secret {
		return "", "", oauthErr(http.StatusBadRequest, errInvalidRequest, "client_secret",
			"client_secret in the body differs from the Basic credentials")
	}
	switch {
	case id == "":
		return "", "", oauthErr(http.StatusUnauthorized, errInvalidClient, "client_id", "client authentication required")
	case secret == "":
		return "", "", oauthErr(http.StatusUnauthorized, errInvalidClient, "client_secret",
			"client authentication required: a client secret or a client assertion")
	}
	return id, secret, nil
}

// machineMembership is the client's own active membership in its project.
func (s *Server) machineMembership(ctx context.Context, c *store.ClientApplication) (*store.ProjectMembership, *Error) {
	ms, err := s.o.Store.MembershipsByProjectUser(ctx, c.Meta.Project, "ClientApplication/"+c.ID)
	if err != nil {
		return nil, storeFailure("loading the client's membership", err)
	}
	for _, m := range ms {
		if m.IsActive() {
			return m, nil
		}
	}
	return nil, oauthErr(http.StatusBadRequest, errUnauthorizedClient, "client_no_membership",
		"the client has no active membership in its project (a ProjectMembership whose user is ClientApplication/"+c.ID+")")
}

// machineProfile is the membership's profile, ClientApplication/{id} when
// it names none; the client's own profile is displayed by its name, as
// Medplum's token response does (the CLI's whoami prints it).
func machineProfile(c *store.ClientApplication, m *store.ProjectMembership) *store.Reference {
	own := "ClientApplication/" + c.ID
	if m.Profile != nil && (m.Profile.Reference != own || m.Profile.Display != "") {
		return m.Profile
	}
	return &store.Reference{Reference: own, Display: c.Name}
}

// projectRef is the project's reference, displayed by its name when it can
// be read.
func (s *Server) projectRef(ctx context.Context, id string) *store.Reference {
	ref := &store.Reference{Reference: "Project/" + id}
	if p, err := store.Get[store.Project](ctx, s.o.Store, id); err == nil {
		ref.Display = p.Name
	}
	return ref
}

// withoutScopes drops names from a space-separated scope.
func withoutScopes(scope string, names ...string) string {
	kept := strings.Fields(scope)[:0]
	for _, tok := range strings.Fields(scope) {
		if !slices.Contains(names, tok) {
			kept = append(kept, tok)
		}
	}
	return strings.Join(kept, " ")
}

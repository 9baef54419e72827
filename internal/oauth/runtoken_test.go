package oauth

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
)

// TestRunTokenActsAsTheCallerUntilRevoked: a run's token authenticates as the sign-in it was
// derived from, and is refused once the run revokes it; the caller's own token stays good.
func TestRunTokenActsAsTheCallerUntilRevoked(t *testing.T) {
	e := newEnv(t)
	tok := e.signIn(t, "web", "alice")
	auth := func(token string) (*Identity, *AuthError) {
		r := httptest.NewRequest("GET", "/fhir/R4/Patient", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		return e.srv.Authenticate(context.Background(), r)
	}
	caller, aerr := auth(tok.AccessToken)
	if aerr != nil {
		t.Fatal(aerr)
	}
	ctx := context.Background()
	runToken, revoke, err := e.srv.IssueRunToken(ctx, caller, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, aerr := auth(runToken)
	if aerr != nil {
		t.Fatalf("the run's token is refused: %v", aerr)
	}
	if got.UserID != caller.UserID || got.MembershipID != caller.MembershipID || got.Profile != caller.Profile ||
		got.ProjectID != caller.ProjectID || got.ClientID != caller.ClientID || got.Scope != caller.Scope || got.LoginID == caller.LoginID {
		t.Errorf("run identity %+v, caller %+v", got, caller)
	}
	revoke(ctx)
	if _, aerr := auth(runToken); aerr == nil || aerr.Reason != "revoked" {
		t.Errorf("the run's token still authenticates after the run: %v", aerr)
	}
	if _, aerr := auth(tok.AccessToken); aerr != nil {
		t.Errorf("the caller's token was revoked with the run's: %v", aerr)
	}
	if _, _, err := e.srv.IssueRunToken(ctx, &Identity{ProjectID: caller.ProjectID, Profile: "Practitioner/alice"}, time.Minute); !errors.Is(err, ErrNoSignIn) {
		t.Errorf("an identity without a sign-in that is no bot: %v", err)
	}
}

// TestRunTokenOfABotRunningAsItself: a run made as the bot gets a token acting as the bot —
// profile Bot/{id}, no user, its membership's scope and never admin, or without a membership the
// project's full access — refused once the run revokes it, or once the bot's membership ends.
func TestRunTokenOfABotRunningAsItself(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	auth := func(token string) (*Identity, *AuthError) {
		r := httptest.NewRequest("GET", "/fhir/R4/Patient", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		return e.srv.Authenticate(ctx, r)
	}
	for _, id := range []string{"b1", "b2"} {
		bot := &store.Bot{Name: id}
		bot.Meta.Project = "p1"
		e.put(bot, id)
	}
	m := &store.ProjectMembership{
		Project: store.Reference{Reference: "Project/p1"},
		User:    store.Reference{Reference: "Bot/b1"},
		Profile: &store.Reference{Reference: "Bot/b1"},
		Scope:   "system/Patient.read",
		Admin:   true,
	}
	if err := e.st.Create(ctx, m, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	// As botapi's botIdentity has it for a bot with a membership.
	run := &Identity{ProjectID: "p1", Profile: "Bot/b1", Scope: m.Scope, MembershipID: m.ID}
	token, revoke, err := e.srv.IssueRunToken(ctx, run, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, aerr := auth(token)
	if aerr != nil {
		t.Fatalf("the bot's run token is refused: %v", aerr)
	}
	if got.Profile != "Bot/b1" || got.UserID != "" || got.ClientID != "" || got.ProjectID != "p1" ||
		got.MembershipID != m.ID || got.Scope != m.Scope || got.Admin || got.LoginID == "" {
		t.Errorf("bot run identity %+v", got)
	}
	revoke(ctx)
	if _, aerr := auth(token); aerr == nil || aerr.Reason != "revoked" {
		t.Errorf("the bot's token still authenticates after the run: %v", aerr)
	}

	// A membership ended during the run ends the token with it.
	token, revoke, err = e.srv.IssueRunToken(ctx, run, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer revoke(ctx)
	if _, aerr := auth(token); aerr != nil {
		t.Fatal(aerr)
	}
	inactive := false
	m.Active = &inactive
	if _, err := e.st.Put(ctx, m, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, aerr := auth(token); aerr == nil || aerr.Reason != "membership" {
		t.Errorf("the bot's token outlives its membership: %v", aerr)
	}

	// Without a membership: the project's full access, as the run has.
	token, revoke, err = e.srv.IssueRunToken(ctx, &Identity{ProjectID: "p1", Profile: "Bot/b2"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, aerr = auth(token)
	if aerr != nil {
		t.Fatalf("the token of a bot without a membership is refused: %v", aerr)
	}
	if got.Profile != "Bot/b2" || got.UserID != "" || got.ProjectID != "p1" || got.MembershipID != "" || got.Scope != "" || got.Admin {
		t.Errorf("membership-less bot run identity %+v", got)
	}
	// Again, from the session cache.
	if again, aerr := auth(token); aerr != nil || *again != *got {
		t.Errorf("second request: %+v %v", again, aerr)
	}
	revoke(ctx)
	if _, aerr := auth(token); aerr == nil || aerr.Reason != "revoked" {
		t.Errorf("the membership-less bot's token still authenticates after the run: %v", aerr)
	}
}

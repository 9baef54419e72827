package oauth

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"
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
	if _, _, err := e.srv.IssueRunToken(ctx, &Identity{ProjectID: caller.ProjectID, Profile: "Bot/b"}, time.Minute); !errors.Is(err, ErrNoSignIn) {
		t.Errorf("an identity without a sign-in: %v", err)
	}
}

package botapi

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
)

// botMember gives bot a membership in the fixture's project with scope.
func (f *apiFixture) botMember(t *testing.T, bot *store.Bot, scope string, active bool) *store.ProjectMembership {
	t.Helper()
	ref := store.Reference{Reference: "Bot/" + bot.ID}
	m := &store.ProjectMembership{Project: store.Reference{Reference: "Project/" + f.project.ID}, User: ref, Profile: &ref, Scope: scope}
	if !active {
		m.Active = &active
	}
	f.mustCreate(t, m)
	return m
}

// TestBotRunsWithinItsMembershipScope: a bot running as itself is
// authorized against its membership's scope — a read it allows reaches
// the backend, a write it does not is refused before the backend — for
// $execute and for a run without a request alike; a runAsUser bot runs
// within its caller's rights whatever its membership says; a bot whose
// membership is inactive does not run as itself.
func TestBotRunsWithinItsMembershipScope(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	narrow := f.deployBot(t, &store.Bot{Name: "narrow"}, identityBot)
	f.botMember(t, narrow, "user/Patient.rs", true)

	n := len(f.backendRequests())
	r := f.serve(t, f.memberToken, http.MethodPost, "/fhir/R4/Bot/"+narrow.ID+"/$execute", `{}`)
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "Observation") {
		t.Fatalf("a bot whose scope allows no write: %d %s", r.status, r.body)
	}
	if got := f.backendProfiles(t, n); len(got) != 1 || got[0] != "Bot/"+narrow.ID+" user=" {
		t.Fatalf("the backend got %v, want the bot's read alone", got)
	}
	n = len(f.backendRequests())
	res, err := f.api.RunMessage(context.Background(), Message{Project: f.project.ID, Bot: "Bot/" + narrow.ID, ContentType: "application/json", Body: []byte(`{}`)})
	if err != nil || res.Outcome.String() == "success" {
		t.Fatalf("a run without a request: %v %+v", err, res)
	}
	if got := f.backendProfiles(t, n); len(got) != 1 {
		t.Fatalf("the backend got %v, want the bot's read alone", got)
	}

	// Within its scope the same code runs to its end.
	wide := f.deployBot(t, &store.Bot{Name: "wide"}, identityBot)
	f.botMember(t, wide, "user/Patient.rs user/Observation.c", true)
	if r := f.serve(t, f.memberToken, http.MethodPost, "/fhir/R4/Bot/"+wide.ID+"/$execute", `{}`); r.status != http.StatusOK {
		t.Fatalf("a bot whose scope allows its calls: %d %s", r.status, r.body)
	}

	// runAsUser: the caller's rights (bob's full access), not the membership's.
	asUser := f.deployBot(t, &store.Bot{Name: "as-user", RunAsUser: true}, identityBot)
	f.botMember(t, asUser, "user/Patient.rs", true)
	if r := f.serve(t, f.memberToken, http.MethodPost, "/fhir/R4/Bot/"+asUser.ID+"/$execute", `{}`); r.status != http.StatusOK {
		t.Fatalf("a runAsUser bot: %d %s", r.status, r.body)
	}

	off := f.deployBot(t, &store.Bot{Name: "off"}, identityBot)
	f.botMember(t, off, "", false)
	n = len(f.backendRequests())
	r = f.serve(t, f.memberToken, http.MethodPost, "/fhir/R4/Bot/"+off.ID+"/$execute", `{}`)
	if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "inactive") || len(f.backendRequests()) != n {
		t.Fatalf("a bot whose membership is inactive: %d %s", r.status, r.body)
	}
}

// TestOnlyABotsMembershipHasAScope: a scope on a person's membership is
// refused (its scopes come from its client), as is one that does not
// parse.
func TestOnlyABotsMembershipHasAScope(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	user := &store.User{Email: "carol@example.com"}
	f.mustCreate(t, user)
	m := &store.ProjectMembership{Project: store.Reference{Reference: "Project/" + f.project.ID}, User: store.Reference{Reference: "User/" + user.ID}, Scope: "user/*.rs"}
	if err := f.st.Create(context.Background(), m, store.PutOptions{}); err == nil || !strings.Contains(err.Error(), "scope") {
		t.Fatalf("a person's membership with a scope: %v", err)
	}
	bot := f.deployBot(t, &store.Bot{Name: "b"}, identityBot)
	ref := store.Reference{Reference: "Bot/" + bot.ID}
	m = &store.ProjectMembership{Project: store.Reference{Reference: "Project/" + f.project.ID}, User: ref, Profile: &ref, Scope: "user/Patient.frobnicate"}
	err := f.st.Create(context.Background(), m, store.PutOptions{})
	if err == nil || !strings.Contains(err.Error(), "scope") {
		t.Fatalf("a bot's membership with a bad scope: %v", err)
	}
}

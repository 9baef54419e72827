package botapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/gateway/gatewaytest"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// tokenBot hands its getAccessToken to the test through a search the backend records, then
// waits on Patient/slow so that the test can use the token while the run lasts.
const tokenBot = `exports.handler = async (medplum) => {
  const token = medplum.getAccessToken();
  await medplum.search('Patient', { 'run-token': token }).catch(() => undefined); // the backend answers 404
  await medplum.readResource('Patient', 'slow');
  return { same: token === medplum.getAccessToken() };
};`

// TestRunTokenOfABotRunningAsItself: a bot running as itself (Medplum's default) gets a token
// the gateway authenticates as the bot — profile Bot/{id}, no user, its membership's scope — while
// the run lasts, and refuses with 401 once the run has ended. The token is issued by another
// oauth.Server on the same store, as another replica would.
func TestRunTokenOfABotRunningAsItself(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	f := newAPIFixtureOn(t, st, Options{RunTokens: gatewaytest.OAuth(t, st)})
	bot := f.deployBot(t, &store.Bot{Name: "token"}, tokenBot)
	m := &store.ProjectMembership{
		Project: store.Reference{Reference: "Project/" + f.project.ID}, User: store.Reference{Reference: "Bot/" + bot.ID},
		Profile: &store.Reference{Reference: "Bot/" + bot.ID}, Scope: "system/Patient.read",
	}
	m.Meta.Project = f.project.ID
	f.mustCreate(t, m)

	done := make(chan response, 1)
	go func() { done <- f.serve(t, f.memberToken, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", `{}`) }()
	select {
	case <-f.slowStarted:
	case r := <-done:
		t.Fatalf("the run ended before it waited: %d %s", r.status, r.body)
	}
	token := ""
	for _, r := range f.backendRequests() {
		if q, err := url.ParseQuery(r.Query); err == nil && q.Get("run-token") != "" {
			token = q.Get("run-token")
		}
	}
	if token == "" {
		t.Fatal("the bot's token did not reach the backend")
	}

	n := len(f.backendRequests())
	if r := f.serve(t, token, http.MethodGet, "/fhir/R4/Patient/p1", ""); r.status != http.StatusOK {
		t.Errorf("the run's token during the run: %d %s", r.status, r.body)
	}
	if got := f.backendProfiles(t, n); len(got) != 1 || got[0] != "Bot/"+bot.ID+" user=" {
		t.Errorf("the run's token reached the backend as %v", got)
	}
	// The membership's scope holds: it reads patients, and writes nothing.
	if r := f.serve(t, token, http.MethodPost, "/fhir/R4/Observation", `{"resourceType":"Observation","status":"final"}`); r.status != http.StatusForbidden {
		t.Errorf("a write outside the bot's scope: %d %s", r.status, r.body)
	}

	f.releaseSlow()
	if r := <-done; r.status != http.StatusOK || !strings.Contains(r.body, `"same":true`) {
		t.Fatalf("run: %d %s", r.status, r.body)
	}
	if r := f.serve(t, token, http.MethodGet, "/fhir/R4/Patient/p1", ""); r.status != http.StatusUnauthorized {
		t.Errorf("the run's token after the run: %d %s", r.status, r.body)
	}
}

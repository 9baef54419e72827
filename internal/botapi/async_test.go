package botapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/deploy"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// jobStatus GETs a job's status as the identity.
func (f *botFixture) jobStatus(t *testing.T, id *oauth.Identity, jobID string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/fhir/R4/job/"+jobID+"/status", nil)
	w := httptest.NewRecorder()
	op := f.api.Handler(targetOf(r))
	if op == nil {
		t.Fatal("job status is not an operation")
	}
	op(w, r, id, nil)
	return w.Code, w.Body.String()
}

// TestAsyncJobIsReadableByItsStarterAndAdminsOnly starts an async run as
// one member and reads its job as each kind of caller; every refusal is
// the 404 of a job that does not exist.
func TestAsyncJobIsReadableByItsStarterAndAdminsOnly(t *testing.T) {
	ctx := context.Background()
	f := newBotFixture(t)
	project, other := &store.Project{Name: "p"}, &store.Project{Name: "other"}
	for _, p := range []*store.Project{project, other} {
		if err := f.st.Create(ctx, p, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bot := &store.Bot{Name: "echo"}
	bot.Meta.Project = project.ID
	if err := f.st.Create(ctx, bot, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.Deploy(ctx, f.st, f.api.o.Compiler, bot.ID, "index.js", `exports.handler = async () => "secret result";`); err != nil {
		t.Fatal(err)
	}
	alice := &oauth.Identity{UserID: "alice", LoginID: "l1", ProjectID: project.ID}
	aliceAgain := &oauth.Identity{UserID: "alice", LoginID: "l2", ClientID: "other-app", ProjectID: project.ID}
	bob := &oauth.Identity{UserID: "bob", ProjectID: project.ID}
	admin := &oauth.Identity{UserID: "carol", ProjectID: project.ID, Admin: true}
	otherAdmin := &oauth.Identity{UserID: "dave", ProjectID: other.ID, Admin: true}

	r := httptest.NewRequest(http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", strings.NewReader(`{}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Prefer", "respond-async")
	w := httptest.NewRecorder()
	f.api.Handler(targetOf(r))(w, r, alice, nil)
	if w.Code != http.StatusAccepted {
		t.Fatalf("async run: %d %s", w.Code, w.Body)
	}
	loc := w.Header().Get("Content-Location")
	jobID := strings.TrimSuffix(loc[strings.Index(loc, "/job/")+len("/job/"):], "/status")

	// Wait for the run to end, polling as its starter (bounded: the bot
	// returns at once).
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body := f.jobStatus(t, alice, jobID)
		if status == http.StatusOK {
			if !strings.Contains(body, "secret result") || strings.Contains(body, "owner") {
				t.Fatalf("job: %s", body)
			}
			break
		}
		if status != http.StatusAccepted || time.Now().After(deadline) {
			t.Fatalf("polling as the starter: %d %s", status, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stored, err := store.Get[store.AsyncJob](ctx, f.st, jobID)
	if err != nil || stored.Owner == nil || stored.Owner.Reference != "User/alice" {
		t.Fatalf("stored job owner: %+v %v", stored, err)
	}
	_, missing := f.jobStatus(t, alice, "no-such-job")
	missing = strings.ReplaceAll(missing, "no-such-job", jobID)

	tests := []struct {
		name string
		id   *oauth.Identity
		ok   bool
	}{
		{"the starter", alice, true},
		{"the starter from another sign-in and client", aliceAgain, true},
		{"another member", bob, false},
		{"a project admin", admin, true},
		{"another project's admin", otherAdmin, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := f.jobStatus(t, tt.id, jobID)
			if tt.ok {
				if status != http.StatusOK || !strings.Contains(body, "secret result") {
					t.Fatalf("%d %s", status, body)
				}
				return
			}
			if status != http.StatusNotFound || body != missing {
				t.Fatalf("%d %s, want the 404 of a missing job: %s", status, body, missing)
			}
		})
	}

	// A job stored before owners were recorded: admins only.
	legacy := &store.AsyncJob{Status: jobCompleted, Request: "http://gw.test/fhir/R4/Bot/x/$execute"}
	legacy.Meta.Project = project.ID
	if err := f.st.Create(ctx, legacy, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   *oauth.Identity
		want int
	}{{alice, 404}, {bob, 404}, {admin, 200}} {
		if status, body := f.jobStatus(t, c.id, legacy.ID); status != c.want {
			t.Errorf("ownerless job as %s: %d %s, want %d", c.id.UserID, status, body, c.want)
		}
	}
}

func TestMedplumClientRefusesTraversingPaths(t *testing.T) {
	// No backend: a path that got past the check would panic on the nil
	// Backend instead of being answered.
	c := medplumClient{}
	for _, p := range []string{"Patient/..%2f..%2foutside", "Patient/%252e%252e/outside", "Patient/%2e%2e%3b/x", "/outside"} {
		status, ct, body, err := c.Do(context.Background(), http.MethodGet, p, nil, nil, "", nil)
		var out struct {
			ResourceType string
		}
		_ = json.Unmarshal(body, &out)
		if err != nil || status != http.StatusBadRequest || !strings.Contains(ct, "fhir+json") || out.ResourceType != "OperationOutcome" {
			t.Errorf("%s: %d %s %s %v, want a 400 OperationOutcome", p, status, ct, body, err)
		}
	}
}

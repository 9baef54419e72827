package botapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/kvqueue"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// identityBot reads Patient/p1 and creates an Observation, and says who
// asked for the run.
const identityBot = `exports.handler = async (medplum, event) => {
  await medplum.readResource('Patient', 'p1');
  await medplum.createResource({ resourceType: 'Observation', status: 'final' });
  return { requester: event.requester.reference };
};`

// backendProfiles are the profile headers of the backend's requests
// since the nth, and whether every one of them carried no user and the
// fixture's project.
func (f *apiFixture) backendProfiles(t *testing.T, since int) []string {
	t.Helper()
	var out []string
	for _, r := range f.backendRequests()[since:] {
		if r.Header.Get("X-Fhirgate-Project") != f.project.ID || r.Header.Get("Authorization") != "" {
			t.Errorf("backend request %s %s: project %q, authorization %q", r.Method, r.Path, r.Header.Get("X-Fhirgate-Project"), r.Header.Get("Authorization"))
		}
		out = append(out, r.Header.Get("X-Fhirgate-Profile")+" user="+r.Header.Get("X-Fhirgate-User"))
	}
	return out
}

// TestBotRunsAsItselfUnlessRunAsUser: a member's $execute of a bot runs
// its medplum calls as Bot/{id} (no user, the project's full access),
// while event.requester stays the member; a runAsUser bot's calls are
// the member's.
func TestBotRunsAsItselfUnlessRunAsUser(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	self := f.deployBot(t, &store.Bot{Name: "self"}, identityBot)
	asUser := f.deployBot(t, &store.Bot{Name: "as-user", RunAsUser: true}, identityBot)
	for _, tc := range []struct {
		bot  *store.Bot
		want string
	}{{self, "Bot/" + self.ID + " user="}, {asUser, "Practitioner/bob user="}} {
		n := len(f.backendRequests())
		r := f.serve(t, f.memberToken, http.MethodPost, "/fhir/R4/Bot/"+tc.bot.ID+"/$execute", `{}`)
		if r.status != http.StatusOK || r.json(t)["requester"] != "Practitioner/bob" {
			t.Fatalf("%s: %d %s", tc.bot.Name, r.status, r.body)
		}
		got := f.backendProfiles(t, n)
		if len(got) != 2 {
			t.Fatalf("%s: the backend got %v, want a read and a create", tc.bot.Name, got)
		}
		for _, p := range got {
			// bob's User id is a UUID: compare the profile, and the user only for the bot.
			if !strings.HasPrefix(p, strings.TrimSuffix(tc.want, "user=")) || (tc.bot == self && p != tc.want) {
				t.Errorf("%s reached the backend as %q, want %q", tc.bot.Name, p, tc.want)
			}
		}
	}
}

// TestRunMessageReachesTheBackendAsTheBot: a run without a request (an
// MLLP message) reaches the backend through the request-less route as
// Bot/{id}; with a Caller, a runAsUser bot runs as the caller, and a bot
// without it still as itself; a Caller of another project is refused.
func TestRunMessageReachesTheBackendAsTheBot(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	self := f.deployBot(t, &store.Bot{Name: "self"}, identityBot)
	asUser := f.deployBot(t, &store.Bot{Name: "as-user", RunAsUser: true}, identityBot)
	writer := &oauth.Identity{ProjectID: f.project.ID, UserID: "u-writer", Profile: "Practitioner/writer", Scope: "user/*.cruds"}
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		bot           *store.Bot
		caller        *oauth.Identity
		want, request string
	}{
		{"no caller", self, nil, "Bot/" + self.ID + " user=", "Bot/" + self.ID},
		{"no caller, runAsUser", asUser, nil, "Bot/" + asUser.ID + " user=", "Bot/" + asUser.ID},
		{"caller, as itself", self, writer, "Bot/" + self.ID + " user=", "Practitioner/writer"},
		{"caller, runAsUser", asUser, writer, "Practitioner/writer user=u-writer", "Practitioner/writer"},
	} {
		n := len(f.backendRequests())
		res, err := f.api.RunMessage(ctx, Message{Project: f.project.ID, Bot: "Bot/" + tc.bot.ID, ContentType: "text/plain", Body: []byte("hi"), Caller: tc.caller})
		if err != nil || res.Outcome.String() != "success" {
			t.Fatalf("%s: %v %+v", tc.name, err, res)
		}
		var out map[string]any
		if err := json.Unmarshal(res.Body, &out); err != nil || out["requester"] != tc.request {
			t.Errorf("%s: result %s, want requester %s", tc.name, res.Body, tc.request)
		}
		got := f.backendProfiles(t, n)
		if len(got) != 2 || got[0] != tc.want || got[1] != tc.want {
			t.Errorf("%s: the backend saw %v, want %q twice", tc.name, got, tc.want)
		}
	}
	stranger := &oauth.Identity{ProjectID: "another-project", UserID: "u"}
	_, err := f.api.RunMessage(ctx, Message{Project: f.project.ID, Bot: "Bot/" + asUser.ID, ContentType: "text/plain", Body: []byte("hi"), Caller: stranger})
	if fe := fhir.AsError(err); fe == nil || fe.Status != http.StatusForbidden {
		t.Errorf("a caller of another project: %v", err)
	}
}

// TestAsyncExecuteRunsAsAQueueJob: an async $execute is a job on the
// store's queue; the queue's worker runs it through the request-less
// route (the bot, running as itself, reaches the backend as Bot/{id})
// and the poller gets the result.
func TestAsyncExecuteRunsAsAQueueJob(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	q := kvqueue.New(st.KV(), queue.Options{PollInterval: 50 * time.Millisecond}, nil)
	f := newAPIFixtureOn(t, st, Options{Queue: q})
	if err := RegisterJobs(q, st, func(string) (*API, error) { return f.api, nil }, nil); err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Stop(context.Background()) })

	bot := f.deployBot(t, &store.Bot{Name: "self"}, identityBot)
	r := f.serve(t, f.memberToken, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", `{}`, "Prefer", "respond-async")
	if r.status != http.StatusAccepted {
		t.Fatalf("async execute: %d %s", r.status, r.body)
	}
	jobID := jobIDOf(r.header.Get("Content-Location"))
	job := waitJobStatus(t, st, jobID)
	if param := firstParameter(t, job); job.Status != jobCompleted || !strings.Contains(param["valueString"].(string), `"requester":"Practitioner/bob"`) {
		t.Fatalf("job: %s %v", job.Status, param)
	}
	if got := f.backendProfiles(t, 0); len(got) != 2 || got[0] != "Bot/"+bot.ID+" user=" {
		t.Errorf("the queued run reached the backend as %v", got)
	}
}

// TestRescuedAsyncJobIsFailedNotRun: a delivery the queue marks Rescued
// (its runner died mid-run) fails the job and never runs the bot again;
// one for a job that has ended already changes nothing.
func TestRescuedAsyncJobIsFailedNotRun(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	bot := f.deployBot(t, &store.Bot{Name: "self"}, identityBot)
	ctx := context.Background()
	w := &asyncWorker{st: f.st, apis: func(string) (*API, error) { return f.api, nil }, logger: f.api.o.Logger}
	deliver := func(job *store.AsyncJob) {
		args, _ := json.Marshal(asyncArgs{Job: job.ID, Caller: f.admin, Bot: bot.ID, ContentType: "application/json", Body: []byte(`{}`)})
		if err := w.deliver(ctx, &queue.Delivery{ID: "q1", Kind: AsyncKind, Args: args, Attempt: 2, MaxAttempts: asyncAttempts, Rescued: true}); err != nil {
			t.Fatal(err)
		}
	}
	running := &store.AsyncJob{Status: jobAccepted, Request: "r"}
	running.Meta.Project = f.project.ID
	f.mustCreate(t, running)
	deliver(running)
	got, err := store.Get[store.AsyncJob](ctx, f.st, running.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got.Output)
	if got.Status != jobError || !strings.Contains(string(b), "not run again") {
		t.Errorf("rescued job: %s %s", got.Status, b)
	}
	done := &store.AsyncJob{Status: jobCompleted, Request: "r"}
	done.Meta.Project = f.project.ID
	f.mustCreate(t, done)
	deliver(done)
	if again, _ := store.Get[store.AsyncJob](ctx, f.st, done.ID); again.Meta.VersionID != done.Meta.VersionID {
		t.Errorf("an ended job was rewritten: %s", again.Status)
	}
	if reqs := f.backendRequests(); len(reqs) != 0 {
		t.Errorf("the bot ran: the backend got %d requests", len(reqs))
	}
}

// jobIDOf reads the job id out of a status URL.
func jobIDOf(loc string) string {
	return strings.TrimSuffix(loc[strings.Index(loc, "/job/")+len("/job/"):], "/status")
}

// waitJobStatus polls the stored job until it has left accepted.
func waitJobStatus(t *testing.T, st *store.Store, id string) *store.AsyncJob {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		job, err := store.Get[store.AsyncJob](context.Background(), st, id)
		if err != nil {
			t.Fatal(err)
		}
		if job.Status != jobAccepted {
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s", id, job.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

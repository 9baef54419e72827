package botapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// pollJobOver polls a job's status URL through the gateway until the job
// has ended: 202 while it runs, 200 once it has.
func (f *apiFixture) pollJobOver(t *testing.T, token, statusURL string) *store.AsyncJob {
	t.Helper()
	path := strings.TrimPrefix(statusURL, f.srv.URL)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := f.serve(t, token, http.MethodGet, path, "")
		if r.status == http.StatusOK {
			var job store.AsyncJob
			if err := json.Unmarshal([]byte(r.body), &job); err != nil {
				t.Fatal(err)
			}
			return &job
		}
		if r.status != http.StatusAccepted || time.Now().After(deadline) {
			t.Fatalf("job status: %d %s", r.status, r.body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// firstParameter is the first parameter of a job's output Parameters.
func firstParameter(t *testing.T, job *store.AsyncJob) map[string]any {
	t.Helper()
	params, _ := job.Output["parameter"].([]any)
	if job.Output["resourceType"] != "Parameters" || len(params) != 1 {
		t.Fatalf("job output: %v", job.Output)
	}
	return params[0].(map[string]any)
}

// TestAsyncExecuteThroughTheGateway: Prefer: respond-async answers 202
// with the job's status URL at once; the job is stored in the caller's
// project, ends completed with the bot's result in Medplum's Parameters
// shape (or in error with the bot's message), is audited like a
// synchronous run, and is not seen from another project.
func TestAsyncExecuteThroughTheGateway(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	echo := f.deployBot(t, &store.Bot{Name: "echo"}, `exports.handler = async (medplum, event) => ({ doubled: event.input.n * 2 });`)
	thrower := f.deployBot(t, &store.Bot{Name: "thrower"}, `exports.handler = async () => { throw new Error('no beds left'); };`)

	r := f.serve(t, f.adminToken, http.MethodPost, "/fhir/R4/Bot/"+echo.ID+"/$execute", `{"n":4}`, "Prefer", "respond-async")
	if r.status != http.StatusAccepted {
		t.Fatalf("async execute: %d %s", r.status, r.body)
	}
	statusURL := r.header.Get("Content-Location")
	if !strings.HasPrefix(statusURL, f.srv.URL+"/fhir/R4/job/") || !strings.HasSuffix(statusURL, "/status") || outcomeText(t, r) != "Accepted" {
		t.Fatalf("async answer: Content-Location %q, %s", statusURL, r.body)
	}
	if diag := r.json(t)["issue"].([]any)[0].(map[string]any)["diagnostics"]; diag != statusURL {
		t.Errorf("the outcome's diagnostics %v are not the status URL", diag)
	}
	job := f.pollJobOver(t, f.adminToken, statusURL)
	param := firstParameter(t, job)
	if job.Status != "completed" || param["name"] != "responseBody" || param["valueString"] != `{"doubled":8}` {
		t.Errorf("completed job: %s %v", job.Status, param)
	}
	if job.Request != f.srv.URL+"/fhir/R4/Bot/"+echo.ID+"/$execute" || job.RequestTime == "" || job.TransactionTime == "" {
		t.Errorf("job request %q, times %q %q", job.Request, job.RequestTime, job.TransactionTime)
	}
	stored, err := store.Get[store.AsyncJob](context.Background(), f.st, job.ID)
	if err != nil || stored.Meta.Project != f.project.ID || stored.Status != "completed" {
		t.Fatalf("stored job: %v %+v", err, stored)
	}

	// Another project does not see the job; only GET is answered.
	other := &store.Project{Name: "other"}
	f.mustCreate(t, other)
	jobPath := strings.TrimPrefix(statusURL, f.srv.URL)
	if r := f.call(t, &oauth.Identity{ProjectID: other.ID, Admin: true}, http.MethodGet, jobPath, ""); r.status != http.StatusNotFound {
		t.Errorf("another project's poll: %d %s", r.status, r.body)
	}
	if r := f.serve(t, f.adminToken, http.MethodDelete, jobPath, ""); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET" {
		t.Errorf("DELETE of a job: %d Allow %q", r.status, r.header.Get("Allow"))
	}
	if r := f.serve(t, f.adminToken, http.MethodGet, "/fhir/R4/job/0190b3c2-7a1e-7c3d-9f00-00000000dead/status", ""); r.status != http.StatusNotFound {
		t.Errorf("an unknown job: %d %s", r.status, r.body)
	}

	// A bot that throws fails its job with its message.
	r = f.serve(t, f.adminToken, http.MethodPost, "/fhir/R4/Bot/"+thrower.ID+"/$execute", `{}`, "Prefer", "respond-async")
	if r.status != http.StatusAccepted {
		t.Fatalf("async execute of the thrower: %d %s", r.status, r.body)
	}
	failed := f.pollJobOver(t, f.adminToken, r.header.Get("Content-Location"))
	if b, _ := json.Marshal(failed.Output); failed.Status != "error" || !strings.Contains(string(b), "no beds left") {
		t.Errorf("failed job: %s %s", failed.Status, b)
	}

	// Input the runner refuses fails the job, after the 202, with the
	// message a synchronous call answers with.
	sync := f.serve(t, f.adminToken, http.MethodPost, "/fhir/R4/Bot/"+echo.ID+"/$execute", `{"n":`)
	if sync.status != http.StatusBadRequest {
		t.Fatalf("sync run of malformed JSON: %d %s", sync.status, sync.body)
	}
	r = f.serve(t, f.adminToken, http.MethodPost, "/fhir/R4/Bot/"+echo.ID+"/$execute", `{"n":`, "Prefer", "respond-async")
	if r.status != http.StatusAccepted {
		t.Fatalf("async run of malformed JSON: %d %s", r.status, r.body)
	}
	bad := f.pollJobOver(t, f.adminToken, r.header.Get("Content-Location"))
	if b, _ := json.Marshal(bad.Output); bad.Status != "error" || !strings.Contains(string(b), outcomeText(t, sync)) {
		t.Errorf("job of malformed input: %s %s; the sync answer says %q", bad.Status, b, outcomeText(t, sync))
	}

	// Two runs happened and were audited; the refused input was not run.
	f.api.Shutdown()
	if evs := f.auditEventsOf(t, echo.ID); len(evs) != 1 || evs[0].Outcome != "0" {
		t.Errorf("echo's AuditEvents: %d", len(evs))
	}
	evs := f.auditEventsOf(t, thrower.ID)
	if len(evs) != 1 || evs[0].Outcome != "4" || !strings.Contains(evs[0].OutcomeDesc, "no beds left") {
		t.Errorf("the thrower's AuditEvents: %+v", evs)
	}
}

// TestJobStatusWhileRunning: a job still accepted or active answers 202
// with the job; an ended one 200 (read by a project admin, who may read
// every job of the project).
func TestJobStatusWhileRunning(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	for status, want := range map[string]int{"accepted": 202, "active": 202, "completed": 200, "error": 200} {
		job := &store.AsyncJob{Status: status, Request: "http://gw.test/fhir/R4/Bot/x/$execute"}
		job.Meta.Project = f.project.ID
		f.mustCreate(t, job)
		r := f.serve(t, f.adminToken, http.MethodGet, "/fhir/R4/job/"+job.ID+"/status", "")
		if body := r.json(t); r.status != want || body["status"] != status || body["id"] != job.ID {
			t.Errorf("job %s: %d, want %d: %s", status, r.status, want, r.body)
		}
	}
}

// TestJobOutputShapes pins how a run's result becomes the job's output:
// Medplum's Parameters with responseBody as a string, a boolean as
// valueBoolean, an OperationOutcome as the outcome parameter, and a
// failure, a refused run or an oversized result as an error.
func TestJobOutputShapes(t *testing.T) {
	t.Parallel()
	ok := func(ct, body string) *botrunner.Result {
		return &botrunner.Result{Outcome: botrunner.OutcomeSuccess, ContentType: ct, Body: []byte(body)}
	}
	tests := []struct {
		name   string
		res    *botrunner.Result
		status string
		param  string
	}{
		{"json object", ok("application/json", `{"a":1}`), "completed", `{"name":"responseBody","valueString":"{\"a\":1}"}`},
		{"json boolean", ok("application/json", `true`), "completed", `{"name":"responseBody","valueBoolean":true}`},
		{"json outcome", ok("application/fhir+json", `{"resourceType":"OperationOutcome","id":"x"}`), "completed",
			`{"name":"outcome","resource":{"id":"x","resourceType":"OperationOutcome"}}`},
		{"malformed json", ok("application/json", `{`), "completed", `{"name":"responseBody","valueString":"{"}`},
		{"text", ok("text/plain", `hello`), "completed", `{"name":"responseBody","valueString":"hello"}`},
		{"at the limit", ok("text/plain", strings.Repeat("y", 64)), "completed", `{"name":"responseBody","valueString":"` + strings.Repeat("y", 64) + `"}`},
		{"over the limit", ok("text/plain", strings.Repeat("y", 65)), "error", `"the bot's result of 65 bytes exceeds the 64-byte limit`},
		{"failed run", &botrunner.Result{Outcome: botrunner.OutcomeTimeout, Message: "bot execution timed out"}, "error", `"bot execution timed out"`},
		{"no run", nil, "error", `too many bot runs in progress`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, out := jobOutput(tc.res, 64)
			b, _ := json.Marshal(out["parameter"].([]any)[0])
			if status != tc.status || !strings.Contains(string(b), tc.param) || out["resourceType"] != "Parameters" {
				t.Errorf("jobOutput = %s %s, want %s containing %s", status, b, tc.status, tc.param)
			}
		})
	}
}

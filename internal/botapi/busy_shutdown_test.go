package botapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
)

// slowBot reads Patient/slow, which the fixture's backend holds until
// released.
const slowBot = `exports.handler = async (medplum) => (await medplum.readResource('Patient', 'slow')).name[0].family;`

// waitSlow waits until n runs are inside the backend's slow read.
func (f *apiFixture) waitSlow(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-f.slowStarted:
		case <-time.After(30 * time.Second):
			t.Fatal("the bot never reached the backend")
		}
	}
}

// TestBusyBotAnswers429: with a bot's one slot taken, a synchronous run
// answers 429 with Retry-After once the runner's queue wait is over, and
// an async one fails its job saying it was not run; neither is audited,
// both are counted as busy; the run holding the slot completes.
func TestBusyBotAnswers429(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	outcomes := map[string]int{}
	f := newAPIFixture(t, Options{OnExecute: func(outcome string, _, _ time.Duration) {
		mu.Lock()
		outcomes[outcome]++
		mu.Unlock()
	}})
	bot := f.deployBot(t, &store.Bot{Name: "single", MaxConcurrent: 1}, slowBot)
	path := "/fhir/R4/Bot/" + bot.ID + "/$execute"

	first := make(chan response, 1)
	go func() { first <- f.serve(t, f.memberToken, http.MethodPost, path, `{}`) }()
	f.waitSlow(t, 1)

	busy := f.serve(t, f.memberToken, http.MethodPost, path, `{}`)
	if busy.status != http.StatusTooManyRequests || busy.header.Get("Retry-After") != "1" || !strings.Contains(outcomeText(t, busy), "too many bot runs in progress") {
		t.Errorf("a run with the bot's slot taken: %d Retry-After %q %s", busy.status, busy.header.Get("Retry-After"), busy.body)
	}
	async := f.serve(t, f.memberToken, http.MethodPost, path, `{}`, "Prefer", "respond-async")
	if async.status != http.StatusAccepted {
		t.Fatalf("async run: %d %s", async.status, async.body)
	}
	job := f.pollJobOver(t, f.memberToken, async.header.Get("Content-Location"))
	if b, _ := json.Marshal(job.Output); job.Status != "error" || !strings.Contains(string(b), "the job was not run") {
		t.Errorf("the async run's job: %s %s", job.Status, b)
	}

	f.releaseSlow()
	if r := <-first; r.status != http.StatusOK || r.body != "Slow" {
		t.Errorf("the run holding the slot: %d %s", r.status, r.body)
	}
	f.api.Shutdown()
	if n := len(f.auditEventsOf(t, bot.ID)); n != 1 {
		t.Errorf("%d AuditEvents, want only the run that happened", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if outcomes["busy"] != 2 || outcomes["success"] != 1 {
		t.Errorf("outcomes observed: %v", outcomes)
	}
}

// TestShutdownStopsRunsAndSaysSo: runs still going when the shutdown grace
// ends are stopped; the synchronous caller is answered 400 (not a 5xx a
// client would retry) saying the run was stopped and will not be run
// again, and the async job is failed with the same reason.
func TestShutdownStopsRunsAndSaysSo(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{ShutdownGrace: 200 * time.Millisecond})
	bot := f.deployBot(t, &store.Bot{Name: "stuck"}, slowBot)
	path := "/fhir/R4/Bot/" + bot.ID + "/$execute"

	sync := make(chan response, 1)
	go func() { sync <- f.serve(t, f.adminToken, http.MethodPost, path, `{}`) }()
	async := f.serve(t, f.adminToken, http.MethodPost, path, `{}`, "Prefer", "respond-async")
	if async.status != http.StatusAccepted {
		t.Fatalf("async run: %d %s", async.status, async.body)
	}
	f.waitSlow(t, 2)
	jobID := strings.TrimSuffix(strings.TrimPrefix(async.header.Get("Content-Location"), f.srv.URL+"/fhir/R4/job/"), "/status")
	if r := f.serve(t, f.adminToken, http.MethodGet, "/fhir/R4/job/"+jobID+"/status", ""); r.status != http.StatusAccepted {
		t.Errorf("the running job's status: %d %s", r.status, r.body)
	}

	f.api.Shutdown()
	r := <-sync
	if r.status != http.StatusBadRequest || !strings.Contains(outcomeText(t, r), "the gateway shut down while the bot ran") ||
		!strings.Contains(outcomeText(t, r), "will not be run again") {
		t.Errorf("the stopped synchronous run: %d %s", r.status, r.body)
	}
	job, err := store.Get[store.AsyncJob](context.Background(), f.st, jobID)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(job.Output); job.Status != "error" || !strings.Contains(string(b), "the gateway shut down while the bot ran") {
		t.Errorf("the stopped async job: %s %s", job.Status, b)
	}
}

// TestJobResultRefusedByTheQuota: a job accepted within its project's
// quota of bot records whose result would take it past the quota fails,
// with an outcome naming the quota, rather than staying accepted forever;
// the refusal is counted and logged.
func TestJobResultRefusedByTheQuota(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	refused := map[string]int{}
	f := newAPIFixture(t, Options{ProjectRecordsMax: 4 << 10, OnRecordRefused: func(record, reason string) {
		mu.Lock()
		refused[record+"/"+reason]++
		mu.Unlock()
	}})
	// No AuditEvent, so the job and its result are the project's only
	// bot records.
	bot := f.deployBot(t, &store.Bot{Name: "big", AuditEventTrigger: "never"}, `exports.handler = async () => 'r'.repeat(8000);`)
	r := f.serve(t, f.adminToken, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", `{}`, "Prefer", "respond-async")
	if r.status != http.StatusAccepted {
		t.Fatalf("async run within the quota: %d %s", r.status, r.body)
	}
	job := f.pollJobOver(t, f.adminToken, r.header.Get("Content-Location"))
	b, _ := json.Marshal(job.Output)
	if job.Status != "error" || !strings.Contains(string(b), "the job's result was not stored") || !strings.Contains(string(b), "project_bot_records_max") ||
		strings.Contains(string(b), "rrrr") {
		t.Errorf("job: %s %.400s", job.Status, b)
	}
	mu.Lock()
	defer mu.Unlock()
	if refused["async_job/quota"] != 1 {
		t.Errorf("refusals observed: %v", refused)
	}
	if n := f.logs.FilterMessage("async job result refused by the store").Len(); n != 1 {
		t.Errorf("%d log entries for the refused result", n)
	}
}

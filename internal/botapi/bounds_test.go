package botapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/deploy"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// fanOutBot calls itself three times per level, catching what each call
// rejects with, and returns how many runs its subtree made and the errors.
const fanOutBot = `exports.handler = async (medplum, event) => {
  const self = event.bot.reference.split('/')[1];
  let runs = 1;
  const errors = [];
  for (let i = 0; i < 3; i++) {
    try {
      const child = await medplum.executeBot(self, {}, 'application/json');
      runs += child.runs;
      errors.push(...child.errors);
    } catch (e) {
      errors.push(e.name + ': ' + e.message);
    }
  }
  return { runs, errors };
};
`

// boundsFixture is an API on a real Badger store with one project and an
// in-process runner, its log observed and its refused records counted.
type boundsFixture struct {
	api     *API
	st      *store.Store
	project *store.Project
	caller  *oauth.Identity
	logs    *observer.ObservedLogs

	mu      sync.Mutex
	refused map[string]int // "record/reason" -> count
}

func newBoundsFixture(t *testing.T, kv func(store.KV) store.KV, o Options) *boundsFixture {
	t.Helper()
	var opts []storetest.Option
	if kv != nil {
		opts = append(opts, storetest.WrapKV(kv))
	}
	f := &boundsFixture{st: storetest.Open(t, opts...), refused: map[string]int{}}
	f.project = &store.Project{Name: "tenant"}
	if err := f.st.Create(context.Background(), f.project, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	f.caller = &oauth.Identity{ProjectID: f.project.ID, UserID: "0190b3c2-7a1e-7c3d-9f00-000000000002", Profile: "Practitioner/0190b3c2-7a1e-7c3d-9f00-000000000001"}
	core, logs := observer.New(zapcore.DebugLevel)
	f.logs = logs
	o.Store, o.Runner, o.Compiler, o.Logger = f.st, botrunner.New(botrunner.Options{MaxConcurrent: 16}), newCompiler(t), zap.New(core)
	o.OnRecordRefused = func(record, reason string) {
		f.mu.Lock()
		f.refused[record+"/"+reason]++
		f.mu.Unlock()
	}
	var err error
	f.api, err = New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.api.Shutdown()
	})
	return f
}

func (f *boundsFixture) bot(t *testing.T, name, code string) *store.Bot {
	t.Helper()
	ctx := context.Background()
	bot := &store.Bot{Name: name}
	bot.Meta.Project = f.project.ID
	if err := f.st.Create(ctx, bot, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.Deploy(ctx, f.st, f.api.o.Compiler, bot.ID, "index.js", code); err != nil {
		t.Fatal(err)
	}
	return bot
}

// do sends a request to the API as the fixture's caller, with a backend
// (bots may call bots only with one; these bots never reach it).
func (f *boundsFixture) do(t *testing.T, method, target, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	op := f.api.Handler(targetOf(r))
	if op == nil {
		t.Fatalf("%s is not a bot operation", target)
	}
	op(w, r, f.caller, &gateway.Backend{})
	return w
}

func (f *boundsFixture) auditEvents(t *testing.T, bot *store.Bot) int {
	t.Helper()
	evs, err := store.Search[store.AuditEvent](context.Background(), f.st, store.Filter{Bot: bot.ID, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// TestBotCallsPerRequestAreBounded: a bot fanning out to itself makes, per
// request, exactly MaxCallsPerRequest runs counting the first; the calls
// past it reject inside the calling bot with an OperationOutcomeError
// naming the limit, which the bot may catch; the next request has a budget
// of its own. Without the bound the tree is 1+3+…+3^5 = 364 runs.
func TestBotCallsPerRequestAreBounded(t *testing.T) {
	t.Parallel()
	f := newBoundsFixture(t, nil, Options{MaxCallsPerRequest: 10})
	bot := f.bot(t, "fanout", fanOutBot)
	for i := 1; i <= 2; i++ {
		w := f.do(t, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", `{}`)
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, w.Code, w.Body)
		}
		var out struct {
			Runs   int      `json:"runs"`
			Errors []string `json:"errors"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		if out.Runs != 10 {
			t.Errorf("request %d made %d runs, want 10", i, out.Runs)
		}
		named := 0
		for _, e := range out.Errors {
			if strings.HasPrefix(e, "OperationOutcomeError: ") && strings.Contains(e, "at most 10 times per request") && strings.Contains(e, "bot_max_calls_per_request") {
				named++
			}
		}
		if named == 0 {
			t.Errorf("request %d: none of %d calls refused named the limit: %q", i, len(out.Errors), out.Errors[:min(3, len(out.Errors))])
		}
	}
	f.api.Shutdown() // writes the queued AuditEvents
	if n := f.auditEvents(t, bot); n != 20 {
		t.Errorf("%d AuditEvents for two requests of at most 10 runs each, want 20", n)
	}
}

// pollJob polls a job's status until it has ended.
func (f *boundsFixture) pollJob(t *testing.T, statusURL string) *store.AsyncJob {
	t.Helper()
	path := statusURL[strings.Index(statusURL, "/fhir/R4/"):]
	deadline := time.Now().Add(30 * time.Second)
	for {
		w := f.do(t, http.MethodGet, path, "")
		if w.Code == http.StatusOK {
			var job store.AsyncJob
			if err := json.Unmarshal(w.Body.Bytes(), &job); err != nil {
				t.Fatal(err)
			}
			return &job
		}
		if w.Code != http.StatusAccepted || time.Now().After(deadline) {
			t.Fatalf("job status: %d %s", w.Code, w.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func jobText(job *store.AsyncJob) string {
	b, _ := json.Marshal(job.Output)
	return string(b)
}

// TestAsyncResultOverTheLimitFailsTheJob: an async run whose result is
// larger than AsyncResultMax ends as a failed job naming the limit, and
// nothing of the result is stored; a result within it completes.
func TestAsyncResultOverTheLimitFailsTheJob(t *testing.T) {
	t.Parallel()
	f := newBoundsFixture(t, nil, Options{AsyncResultMax: 1000})
	bot := f.bot(t, "big", `exports.handler = async (medplum, event) => 'x'.repeat(event.input.n);`)
	run := func(n string) *store.AsyncJob {
		w := f.do(t, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", `{"n":`+n+`}`, "Prefer", "respond-async")
		if w.Code != http.StatusAccepted {
			t.Fatalf("async run: %d %s", w.Code, w.Body)
		}
		return f.pollJob(t, w.Header().Get("Content-Location"))
	}
	job := run("2000")
	if text := jobText(job); job.Status != "error" || !strings.Contains(text, "2000 bytes exceeds the 1000-byte limit") || !strings.Contains(text, "bot_async_result_max") {
		t.Errorf("a 2000-byte result under a 1000-byte limit: job %s %.300s", job.Status, text)
	}
	if strings.Contains(jobText(job), "xxxx") {
		t.Errorf("the refused result was stored")
	}
	if job := run("1000"); job.Status != "completed" || !strings.Contains(jobText(job), strings.Repeat("x", 1000)) {
		t.Errorf("a 1000-byte result: job %s", job.Status)
	}
}

// fillQuota stores AuditEvents of the fixture's project until the store
// refuses one for the quota.
func (f *boundsFixture) fillQuota(t *testing.T, quota int64) {
	t.Helper()
	for i := 0; ; i++ {
		ev := &store.AuditEvent{Outcome: "0", OutcomeDesc: strings.Repeat("f", 500)}
		ev.Meta.Project = f.project.ID
		err := f.st.Create(context.Background(), ev, store.PutOptions{TTL: time.Hour, ProjectQuota: quota})
		if err != nil {
			if !strings.Contains(err.Error(), "quota") {
				t.Fatal(err)
			}
			return
		}
		if i > 1000 {
			t.Fatal("the quota never filled")
		}
	}
}

// TestProjectAtItsQuota: once a project's bot records reach its quota, an
// async run answers 429 with Retry-After naming the quota, and AuditEvents
// of sync runs go to the log at Warn, with their fields but not the
// bot's console output, each one counted — none silently dropped.
func TestProjectAtItsQuota(t *testing.T) {
	t.Parallel()
	const quota = 8 << 10
	f := newBoundsFixture(t, nil, Options{ProjectRecordsMax: quota})
	bot := f.bot(t, "chatty", `exports.handler = async () => { console.log('CONSOLE-CONTENT'); return 'ok'; };`)
	f.fillQuota(t, quota)
	before := f.auditEvents(t, bot)

	w := f.do(t, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", `{}`, "Prefer", "respond-async")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "project_bot_records_max") {
		t.Errorf("async run at the quota: %d Retry-After %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	const runs = 5
	for range runs {
		if w := f.do(t, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", `{}`); w.Code != http.StatusOK {
			t.Fatalf("sync run at the quota: %d %s", w.Code, w.Body)
		}
	}
	f.api.Shutdown()
	if n := f.auditEvents(t, bot); n != before {
		t.Errorf("%d AuditEvents stored past the quota", n-before)
	}
	logged := f.logs.FilterMessage("bot audit event logged instead of stored").All()
	if len(logged) != runs {
		t.Fatalf("%d AuditEvents logged for %d runs at the quota", len(logged), runs)
	}
	for _, e := range logged {
		m := e.ContextMap()
		if e.Level != zapcore.WarnLevel || m["reason"] != "quota" || m["bot"] != "Bot/"+bot.ID || m["project"] != f.project.ID ||
			m["trace_id"] == "" || m["run_outcome"] != "success" || m["requester"] != f.caller.Profile {
			t.Errorf("logged AuditEvent: %s %v", e.Level, m)
		}
		if b, _ := json.Marshal(m); strings.Contains(string(b), "CONSOLE-CONTENT") {
			t.Errorf("the log carries the bot's console output: %s", b)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refused["audit_event/quota"] != runs || f.refused["async_job/quota"] != 1 {
		t.Errorf("refusals observed: %v", f.refused)
	}
}

// lowDisk is a real store whose disk reports little free space.
type lowDisk struct {
	store.KV
	free uint64
}

func (k lowDisk) FreeSpace() (uint64, error) { return k.free, nil }

// TestBotRecordsRefusedAtTheDiskReserve: below the disk reserve for bot
// records, async runs answer 503 and AuditEvents go to the log, while
// other writes (a Login, as a sign-in makes) still go through.
func TestBotRecordsRefusedAtTheDiskReserve(t *testing.T) {
	t.Parallel()
	f := newBoundsFixture(t, func(kv store.KV) store.KV { return lowDisk{KV: kv, free: 100 << 20} }, Options{})
	bot := f.bot(t, "echo", `exports.handler = async () => 'ok';`)
	w := f.do(t, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", `{}`, "Prefer", "respond-async")
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "bot_records_disk_reserve") {
		t.Errorf("async run below the reserve: %d Retry-After %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if w := f.do(t, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", `{}`); w.Code != http.StatusOK {
		t.Fatalf("sync run below the reserve: %d %s", w.Code, w.Body)
	}
	f.api.Shutdown()
	if n := f.auditEvents(t, bot); n != 0 {
		t.Errorf("%d AuditEvents stored below the reserve", n)
	}
	if logged := f.logs.FilterMessage("bot audit event logged instead of stored").FilterField(zap.String("reason", "disk")).Len(); logged != 1 {
		t.Errorf("%d AuditEvents logged for the disk, want 1", logged)
	}
	login := &store.Login{User: store.Reference{Reference: "User/u1"}}
	if err := f.st.Create(context.Background(), login, store.PutOptions{TTL: time.Hour}); err != nil {
		t.Errorf("a Login below the bot-record reserve: %v", err)
	}
}

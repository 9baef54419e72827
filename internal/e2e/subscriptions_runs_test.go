package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/subscription/subscriptiontest"
)

// Triggered runs on the built Caddy: the chain bound between two bots that
// write each other's criteria, a trigger that survives kill -9, and two
// replicas on one PostgreSQL running each trigger once.

// subscribe creates an active rest-hook Subscription of criteria to
// endpoint (Bot/{id} or a URL), with extensions (JSON objects), through
// the gateway, as the token's holder, and returns its id.
func subscribe(t *testing.T, gateway, token, criteria, endpoint string, extensions ...string) string {
	t.Helper()
	ext := ""
	if len(extensions) > 0 {
		ext = `,"extension":[` + strings.Join(extensions, ",") + `]`
	}
	r := do(t, "POST", gateway+"/fhir/R4/Subscription", "application/fhir+json",
		`{"resourceType":"Subscription","status":"active","reason":"test","criteria":"`+criteria+`",`+
			`"channel":{"type":"rest-hook","endpoint":"`+endpoint+`"}`+ext+`}`, bearer(token)...)
	if r.status != 201 {
		t.Fatalf("creating a Subscription on %s: %d %s", criteria, r.status, r.body)
	}
	return r.json(t)["id"].(string)
}

// subscribeBot creates an active Subscription of criteria for botID
// through the gateway, as the token's holder, and returns its id.
func subscribeBot(t *testing.T, gateway, token, criteria, botID string) string {
	t.Helper()
	return subscribe(t, gateway, token, criteria, "Bot/"+botID)
}

// auditResources are the resources of the AuditEvents the admin API lists
// for query (such as "bot=…" or "project=alpha").
func (s *stack) auditResources(t *testing.T, query string) []map[string]any {
	t.Helper()
	r := do(t, "GET", "http://"+s.adminAddr+"/fhirgate/AuditEvent?"+query, "", "")
	if r.status != 200 {
		t.Fatalf("AuditEvents: %d %s", r.status, r.body)
	}
	var out []map[string]any
	entries, _ := r.json(t)["entry"].([]any)
	for _, e := range entries {
		out = append(out, e.(map[string]any)["resource"].(map[string]any))
	}
	return out
}

// entities are the references an AuditEvent names.
func entities(ev map[string]any) []string {
	var out []string
	list, _ := ev["entity"].([]any)
	for _, e := range list {
		what, _ := e.(map[string]any)["what"].(map[string]any)
		ref, _ := what["reference"].(string)
		out = append(out, ref)
	}
	return out
}

// pingPongCaddyfile is the subscriptions stack with two bots running the
// same code, which writes what the other's Subscription watches.
func pingPongCaddyfile(backendURL string) string {
	return strings.Replace(subscriptionsCaddyfile(backendURL), "\t\t\tbot echo {",
		"\t\t\tbot ping {\n\t\t\t\tidentifier https://example.com/bots|ping\n\t\t\t\tsource {{.Testdata}}/pingpong.ts\n\t\t\t}\n"+
			"\t\t\tbot pong {\n\t\t\t\tidentifier https://example.com/bots|pong\n\t\t\t\tsource {{.Testdata}}/pingpong.ts\n\t\t\t}\n\t\t\tbot echo {", 1)
}

// TestSubscriptionChainStopsAtTheBound: ping runs on a Patient and writes
// an Observation, pong runs on an Observation and writes a Patient. The
// bots run as themselves, so their writes reach the backend through the
// request-less route and are matched there; the chain depth must travel
// with them, and the fifth run's write is not delivered: an AuditEvent
// (outcome 8) says so, and the runs stop at five.
func TestSubscriptionChainStopsAtTheBound(t *testing.T) {
	be := subscriptiontest.NewFHIR(t)
	s := startStackWith(t, pingPongCaddyfile(be.URL), "")
	alice := s.token(t, "alpha-app", "alice-token")
	ping, pong := s.botID(t, "alpha", "https://example.com/bots|ping"), s.botID(t, "alpha", "https://example.com/bots|pong")
	onPatient := subscribeBot(t, s.gateway, alice, "Patient", ping)
	subscribeBot(t, s.gateway, alice, "Observation", pong)

	started := time.Now()
	if r := do(t, "POST", s.gateway+"/fhir/R4/Patient", "application/fhir+json", `{"resourceType":"Patient","name":[{"family":"First"}]}`, bearer(alice)...); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var stopped map[string]any
	took := within(t, "the chain stopped with an AuditEvent", started, 60*time.Second, func() bool {
		for _, ev := range s.auditResources(t, "project=alpha") {
			if desc, _ := ev["outcomeDesc"].(string); ev["outcome"] == "8" && strings.Contains(desc, "chain") {
				stopped = ev
				return true
			}
		}
		return false
	})
	time.Sleep(2 * time.Second) // a run past the bound would show by now
	runs := append(s.auditResources(t, "bot="+ping), s.auditResources(t, "bot="+pong)...)
	if len(runs) != 5 {
		t.Fatalf("%d bot runs, want 5 (the bound)", len(runs))
	}
	// The stopped delivery names its Subscription and the Observation the
	// fifth run (ping's third) wrote.
	if got := entities(stopped); len(got) != 2 || !strings.HasPrefix(got[0], "Subscription/") || !strings.HasPrefix(got[1], "Observation/") {
		t.Fatalf("the stopping AuditEvent names %v", got)
	}
	// Each run's AuditEvent names the bot, its Subscription and the resource.
	for _, ev := range s.auditResources(t, "bot="+ping) {
		if got := entities(ev); len(got) != 3 || got[0] != "Bot/"+ping || got[1] != "Subscription/"+onPatient || !strings.HasPrefix(got[2], "Patient/") {
			t.Fatalf("ping's run AuditEvent names %v", got)
		}
	}
	t.Logf("5 runs and the stop recorded within %v of the first write", took.Round(time.Millisecond))
}

// holdingBackend is the searching stand-in behind a proxy that holds
// every count search while held: a Subscription's parameter
// criteria wait there, so a test can kill the gateway while a trigger is
// being matched.
type holdingBackend struct {
	*httptest.Server
	mu       sync.Mutex
	release  chan struct{}
	searched chan struct{} // closed at the first held search
	once     sync.Once
}

func newHoldingBackend(t *testing.T, fhir *subscriptiontest.FHIR) *holdingBackend {
	target, _ := url.Parse(fhir.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	h := &holdingBackend{searched: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		release := h.release
		h.mu.Unlock()
		if release != nil && r.Method == http.MethodGet && r.URL.Query().Get("_summary") == "count" {
			h.once.Do(func() { close(h.searched) })
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

// hold makes searches wait until the returned function is called.
func (h *holdingBackend) hold() (release func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	h.release = ch
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.release = nil
		h.mu.Unlock()
		close(ch)
	}
}

// TestSubscriptionTriggerSurvivesKill9: a write answered 201 whose
// trigger is still being matched (its criteria's search held at the
// backend) when the gateway is killed with SIGKILL runs its bot once the
// gateway is started again on the same store, with no request of its own.
func TestSubscriptionTriggerSurvivesKill9(t *testing.T) {
	fhir := subscriptiontest.NewFHIR(t)
	be := newHoldingBackend(t, fhir)
	s := startStackWith(t, subscriptionsCaddyfile(be.URL), "")
	alice := s.token(t, "alpha-app", "alice-token")
	botID := s.botID(t, "alpha", "https://example.com/bots|subscriber")
	subscribeBot(t, s.gateway, alice, "Patient?family=Crash", botID)

	release := be.hold()
	r := do(t, "POST", s.gateway+"/fhir/R4/Patient", "application/fhir+json", `{"resourceType":"Patient","name":[{"family":"Crash"}]}`, bearer(alice)...)
	if r.status != 201 {
		release()
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	pid := r.json(t)["id"].(string)
	select {
	case <-be.searched:
	case <-time.After(30 * time.Second):
		release()
		t.Fatal("the trigger never asked the backend")
	}
	// The bot has not run: its trigger is still waiting for the search.
	s.kill()
	release()
	restarted := time.Now()
	s.start(s.config)
	t.Logf("the gateway took %v to start again", time.Since(restarted).Round(time.Millisecond))
	got := s.deliveries(t, botID, 1)
	time.Sleep(time.Second) // no second run
	got = s.deliveries(t, botID, 1)
	if len(got) != 1 || got[0]["input"].(map[string]any)["id"] != pid {
		t.Fatalf("after the restart the bot ran %d times: %v", len(got), got)
	}
	t.Logf("the bot's run was recorded within %v of the restart's beginning", time.Since(restarted).Round(time.Millisecond))
}

// replicaSubscriptionsCaddyfile is the replicas' config with
// subscriptions on and the subscriber bot.
var replicaSubscriptionsCaddyfile = strings.NewReplacer(
	"\t\tfhir_base /fhir/R4\n", "\t\tfhir_base /fhir/R4\n\t\tsubscriptions on\n",
	"\t\t\tbot echo {", "\t\t\tbot subscriber {\n\t\t\t\tidentifier https://example.com/bots|subscriber\n\t\t\t\tsource {{.Testdata}}/subscriber.ts\n\t\t\t}\n\t\t\tbot echo {",
).Replace(replicaCaddyfile)

// TestSubscriptionReplicasRunEachTriggerOnce: two replicas on one
// PostgreSQL share River's queue; writes through either run the bot once
// each, never on both.
func TestSubscriptionReplicasRunEachTriggerOnce(t *testing.T) {
	fhir := subscriptiontest.NewFHIR(t)
	rp := startReplicaPairWith(t, replicaSubscriptionsCaddyfile, fhir.URL)
	a, b := rp.a, rp.b
	tokA, tokB := a.token(t, "alpha-app", "alice-token"), b.token(t, "alpha-app", "alice-token")
	botID := a.botID(t, "alpha", "https://example.com/bots|subscriber")
	subscribeBot(t, a.gateway, tokA, "Patient", botID)
	time.Sleep(staleness) // B sees the Subscription

	const writes = 20
	want := map[string]bool{}
	started := time.Now()
	for i := range writes {
		gw, tok := a.gateway, tokA
		if i%2 == 1 {
			gw, tok = b.gateway, tokB
		}
		r := do(t, "POST", gw+"/fhir/R4/Patient", "application/fhir+json", `{"resourceType":"Patient","name":[{"family":"Replica"}]}`, bearer(tok)...)
		if r.status != 201 {
			t.Fatalf("create %d: %d %s", i, r.status, r.body)
		}
		want[r.json(t)["id"].(string)] = true
	}
	a.deliveries(t, botID, writes)
	t.Logf("%d triggers delivered %v after the first write", writes, time.Since(started).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // a duplicate run would show by now
	runs := map[string]int{}
	for _, d := range a.deliveries(t, botID, writes) {
		runs[d["input"].(map[string]any)["id"].(string)]++
	}
	for id := range want {
		if runs[id] != 1 {
			t.Errorf("Patient/%s ran the bot %d times, want once", id, runs[id])
		}
	}
	if len(runs) != writes {
		t.Fatalf("runs by patient %v, want each of %d once", runs, writes)
	}
	got, _ := json.Marshal(runs)
	t.Logf("runs by patient: %s", got)
}

// TestBotMembershipScopeBoundsATriggeredRun: a bot whose membership's
// scope allows reading Patients only, triggered by a Subscription (so
// running as itself through the request-less route), has its write of an
// Observation refused before the backend: its run fails, recorded, and
// the Subscription on Observation never runs.
func TestBotMembershipScopeBoundsATriggeredRun(t *testing.T) {
	be := subscriptiontest.NewFHIR(t)
	s := startStackWith(t, pingPongCaddyfile(be.URL), "")
	alice := s.token(t, "alpha-app", "alice-token")
	ping, pong := s.botID(t, "alpha", "https://example.com/bots|ping"), s.botID(t, "alpha", "https://example.com/bots|pong")
	r := do(t, "POST", "http://"+s.adminAddr+"/fhirgate/ProjectMembership", "application/json",
		`{"project":{"reference":"Project/alpha"},"user":{"reference":"Bot/`+ping+`"},"profile":{"reference":"Bot/`+ping+`"},"scope":"user/Patient.rs"}`)
	if r.status != 201 {
		t.Fatalf("the bot's membership: %d %s", r.status, r.body)
	}
	subscribeBot(t, s.gateway, alice, "Patient", ping)
	subscribeBot(t, s.gateway, alice, "Observation", pong)
	if r := do(t, "POST", s.gateway+"/fhir/R4/Patient", "application/fhir+json", `{"resourceType":"Patient","name":[{"family":"Scoped"}]}`, bearer(alice)...); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	runs := s.auditEvents(t, ping, func(entries []any) bool { return len(entries) >= 1 })
	run := runs[0].(map[string]any)["resource"].(map[string]any)
	if desc, _ := run["outcomeDesc"].(string); run["outcome"] != "4" || !strings.Contains(desc, "Observation") {
		t.Fatalf("the scoped bot's run: outcome %v, %q", run["outcome"], desc)
	}
	time.Sleep(time.Second) // pong would have run by now
	if n := len(s.auditResources(t, "bot="+pong)); n != 0 {
		t.Fatalf("pong ran %d times: the refused write reached the backend", n)
	}
}

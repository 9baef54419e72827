package botapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
)

// TestBotReachesTheBackendAsTheCaller: a runAsUser bot's medplum client
// reads and writes the FHIR backend through the gateway, as the user who
// ran the bot (the gateway's identity headers, no bearer token of theirs)
// and carrying the run's trace id, which is the caller's X-Trace-Id.
func TestBotReachesTheBackendAsTheCaller(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	bot := f.deployBot(t, &store.Bot{Name: "charting", RunAsUser: true}, `exports.handler = async (medplum, event) => {
  const p = await medplum.readResource('Patient', 'p1');
  const o = await medplum.createResource({ resourceType: 'Observation', status: 'final', subject: { reference: 'Patient/p1' } });
  let missing;
  try { await medplum.readResource('Patient', 'nobody'); } catch (e) { missing = e.message; }
  return { family: p.name[0].family, obs: o.id, missing, auth: event.headers.authorization || null, requester: event.requester.reference };
};`)
	const trace = "5b0c2a4e-8f3d-4c1a-9e2b-7d6f5a4b3c21"
	r := f.serve(t, f.memberToken, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", `{}`, "X-Trace-Id", trace)
	if r.status != http.StatusOK {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	got := r.json(t)
	if got["family"] != "Chalmers" || got["obs"] != "o1" || got["auth"] != nil || got["requester"] != "Practitioner/bob" ||
		!strings.Contains(got["missing"].(string), "Not found") {
		t.Errorf("the bot's result: %s", r.body)
	}
	if r.header.Get("X-Trace-Id") != trace {
		t.Errorf("answer's X-Trace-Id %q, want the caller's %q", r.header.Get("X-Trace-Id"), trace)
	}
	reqs := f.backendRequests()
	if len(reqs) != 3 {
		t.Fatalf("the backend got %d requests, want 3: %+v", len(reqs), reqs)
	}
	want := []struct{ method, path string }{{"GET", "/fhir/R4/Patient/p1"}, {"POST", "/fhir/R4/Observation"}, {"GET", "/fhir/R4/Patient/nobody"}}
	for i, req := range reqs {
		if req.Method != want[i].method || req.Path != want[i].path {
			t.Errorf("backend request %d: %s %s, want %s %s", i, req.Method, req.Path, want[i].method, want[i].path)
		}
		h := req.Header
		if h.Get("X-Trace-Id") != trace || h.Get("X-Fhirgate-Project") != f.project.ID || h.Get("X-Fhirgate-Profile") != "Practitioner/bob" ||
			h.Get("Authorization") != "" {
			t.Errorf("backend request %d headers: trace %q project %q profile %q authorization %q", i,
				h.Get("X-Trace-Id"), h.Get("X-Fhirgate-Project"), h.Get("X-Fhirgate-Profile"), h.Get("Authorization"))
		}
	}
	if post := reqs[1]; !strings.HasPrefix(post.Header.Get("Content-Type"), "application/fhir+json") || !strings.Contains(post.Body, `"subject":{"reference":"Patient/p1"}`) {
		t.Errorf("the create reached the backend as %q %s", post.Header.Get("Content-Type"), post.Body)
	}
}

// TestBotCallsBot: medplum.executeBot runs another bot of the caller's
// project in the gateway, by id or by identifier, with the same trace id,
// requester and secrets as an HTTP $execute, and is audited as a run of
// its own; another project's bot is not found; nothing reaches the backend.
func TestBotCallsBot(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	callee := f.deployBot(t, &store.Bot{Name: "callee", Identifier: []store.Identifier{{System: "https://ex.org/bots", Value: "callee"}},
		Secret: []store.ProjectSetting{{Name: "BOT_ONLY", ValueString: "bot-secret"}}},
		`exports.handler = async (medplum, event) => ({ x: event.input.x, trace: event.traceId, requester: event.requester.reference,
  key: event.secrets.API_KEY.valueString, own: event.secrets.BOT_ONLY.valueString });`)
	other := &store.Project{Name: "other"}
	f.mustCreate(t, other)
	theirs := &store.Bot{Name: "theirs"}
	theirs.Meta.Project = other.ID
	f.mustCreate(t, theirs)
	caller := f.deployBot(t, &store.Bot{Name: "caller", RunAsUser: true}, `exports.handler = async (medplum, event) => {
  const byId = await medplum.executeBot('`+callee.ID+`', { x: 1 }, 'application/json');
  const byIdentifier = await medplum.executeBot({ system: 'https://ex.org/bots', value: 'callee' }, { x: 2 }, 'application/json');
  let theirs;
  try { await medplum.executeBot('`+theirs.ID+`', {}, 'application/json'); } catch (e) { theirs = e.message; }
  return { byId, byIdentifier, theirs, trace: event.traceId };
};`)
	r := f.serve(t, f.memberToken, http.MethodPost, "/fhir/R4/Bot/"+caller.ID+"/$execute", `{}`)
	if r.status != http.StatusOK {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	var got struct {
		ByID, ByIdentifier struct {
			X                          int
			Trace, Requester, Key, Own string
		}
		Theirs, Trace string
	}
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatal(err)
	}
	trace := r.header.Get("X-Trace-Id")
	for i, c := range []struct {
		X                          int
		Trace, Requester, Key, Own string
	}{got.ByID, got.ByIdentifier} {
		if c.X != i+1 || c.Trace != trace || c.Requester != "Practitioner/bob" || c.Key != "project-key" || c.Own != "bot-secret" {
			t.Errorf("call %d: %+v (trace %q)", i+1, c, trace)
		}
	}
	if got.Trace != trace || !strings.Contains(got.Theirs, "Bot/"+theirs.ID+" not found") {
		t.Errorf("caller's trace %q (answer %q); another project's bot: %q", got.Trace, trace, got.Theirs)
	}
	if n := len(f.backendRequests()); n != 0 {
		t.Errorf("bot calls sent %d requests to the backend", n)
	}
	f.api.Shutdown()
	calleeRuns := f.auditEventsOf(t, callee.ID)
	if len(calleeRuns) != 2 || len(f.auditEventsOf(t, caller.ID)) != 1 {
		t.Fatalf("AuditEvents: callee %d, caller %d; want 2 and 1", len(calleeRuns), len(f.auditEventsOf(t, caller.ID)))
	}
	for _, ev := range calleeRuns {
		if b, _ := json.Marshal(ev); !strings.Contains(string(b), `{"url":"traceId","valueId":"`+trace+`"}`) || ev.Agent[0].Who.Reference != "Practitioner/bob" {
			t.Errorf("the callee's AuditEvent does not carry the caller's trace and requester: %s", b)
		}
	}
}

// TestBotCallDepthIsBounded: a bot calling itself is refused, inside the
// calling bot, at maxBotDepth levels below the request's run, with an
// error naming the bound; every level that ran is audited.
func TestBotCallDepthIsBounded(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	bot := f.deployBot(t, &store.Bot{Name: "recurse"}, `exports.handler = async (medplum, event) => {
  const self = event.bot.reference.split('/')[1];
  const depth = event.input.depth || 0;
  try {
    return await medplum.executeBot(self, { depth: depth + 1 }, 'application/json');
  } catch (e) {
    return { deepest: depth, error: e.message };
  }
};`)
	r := f.serve(t, f.adminToken, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", `{}`)
	if r.status != http.StatusOK {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	got := r.json(t)
	if got["deepest"] != float64(maxBotDepth) || !strings.Contains(got["error"].(string), "bots may call bots at most 5 deep") {
		t.Errorf("the deepest run: %s", r.body)
	}
	f.api.Shutdown()
	if n := len(f.auditEventsOf(t, bot.ID)); n != maxBotDepth+1 {
		t.Errorf("%d AuditEvents, want %d runs", n, maxBotDepth+1)
	}
}

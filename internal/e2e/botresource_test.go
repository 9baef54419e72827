package e2e

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// medplumExportedBot is a Bot as Medplum's server returns it, with every
// element a client sets (runAsUser aside) and what its server adds to
// meta, fhirgate's settings as extensions.
const medplumExportedBot = `{
  "resourceType": "Bot",
  "meta": {"versionId": "1", "lastUpdated": "2026-01-01T00:00:00.000Z", "project": "medplum-project",
           "author": {"reference": "Practitioner/x"}, "compartment": [{"reference": "Project/medplum-project"}],
           "tag": [{"system": "https://example.com/tags", "code": "imported"}]},
  "implicitRules": "https://example.com/rules",
  "language": "en",
  "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">Imported</div>"},
  "contained": [{"resourceType": "Basic", "id": "c1", "code": {"text": "x"}}],
  "extension": [
    {"url": "https://example.com/owner", "valueString": "ops"},
    {"url": "https://fhirgate.dev/fhir/StructureDefinition/bot-secret", "extension": [{"url": "name", "valueString": "TOKEN"}, {"url": "value", "valueString": "bot-token"}]},
    {"url": "https://fhirgate.dev/fhir/StructureDefinition/bot-max-concurrent", "valueInteger": 2}
  ],
  "modifierExtension": [{"url": "https://example.com/mod", "valueBoolean": false}],
  "identifier": [{"system": "https://example.com/bots", "value": "imported"}],
  "name": "imported",
  "description": "from Medplum",
  "runtimeVersion": "vmcontext",
  "timeout": 10,
  "photo": {"contentType": "image/png", "url": "https://example.com/bot.png"},
  "cronTiming": {"repeat": {"period": 24, "dayOfWeek": ["mon"]}},
  "cronString": "0 4 * * *",
  "category": [{"coding": [{"system": "https://example.com/cat", "code": "ops"}]}],
  "system": false,
  "publicWebhook": false,
  "webhookRawBodyEnabled": false,
  "streamingEnabled": false,
  "auditEventTrigger": "always",
  "auditEventDestination": ["resource", "log"],
  "cdsService": {"hook": "patient-view", "title": "T", "description": "D"},
  "code": "// deprecated"
}`

// TestBotResourceRoundTripsWithHistory: a Bot exported from Medplum is
// imported through the built Caddy and comes back with every element;
// updates are listed by _history and read by vread; its secret extension
// reaches the run, and its auditEventDestination "resource" writes the
// run's AuditEvent to the backend.
func TestBotResourceRoundTripsWithHistory(t *testing.T) {
	s := startStack(t, "")
	alice := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	base := s.gateway + "/fhir/R4/Bot"

	r := do(t, "POST", base, "application/fhir+json", medplumExportedBot, alice...)
	if r.status != 201 {
		t.Fatalf("import: %d %s", r.status, r.body)
	}
	got := r.json(t)
	id := got["id"].(string)
	var sent map[string]any
	if err := json.Unmarshal([]byte(medplumExportedBot), &sent); err != nil {
		t.Fatal(err)
	}
	for key, want := range sent {
		if key != "meta" && !reflect.DeepEqual(got[key], want) {
			t.Errorf("%s: got %v, sent %v", key, got[key], want)
		}
	}
	meta := got["meta"].(map[string]any)
	if meta["project"] != "alpha" || meta["author"] != nil || meta["compartment"] != nil || meta["tag"] == nil {
		t.Errorf("meta %v: want alpha's, the tag kept, Medplum's server fields dropped", meta)
	}
	v1 := meta["versionId"].(string)

	code := `exports.handler = async (medplum, event) => event.secrets.TOKEN.valueString;`
	if r := do(t, "POST", base+"/"+id+"/$deploy", "application/json", mustJSON(t, map[string]string{"code": code, "filename": "index.js"}), alice...); r.status != 200 {
		t.Fatalf("deploy: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", base+"/"+id+"/$execute", "application/json", `{}`, alice...); r.status != 200 || string(r.body) != "bot-token" {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	var posted string
	s.backend.mu.Lock()
	for _, req := range s.backend.requests {
		if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/AuditEvent") {
			posted = req.URL.Path
		}
	}
	s.backend.mu.Unlock()
	if posted == "" {
		t.Fatal("the run's AuditEvent was not written to the backend (auditEventDestination resource)")
	}

	if r := do(t, "PUT", base+"/"+id, "application/fhir+json", strings.Replace(medplumExportedBot, `"from Medplum"`, `"updated"`, 1), alice...); r.status != 200 {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	r = do(t, "GET", base+"/"+id+"/_history", "", "", alice...)
	if r.status != 200 {
		t.Fatalf("_history: %d %s", r.status, r.body)
	}
	entries, _ := r.json(t)["entry"].([]any)
	if len(entries) != 3 {
		t.Fatalf("_history: %d versions, want 3 (import, deploy, update): %s", len(entries), r.body)
	}
	newest := entries[0].(map[string]any)["resource"].(map[string]any)
	oldest := entries[2].(map[string]any)["resource"].(map[string]any)
	if newest["description"] != "updated" || oldest["description"] != "from Medplum" || oldest["meta"].(map[string]any)["versionId"] != v1 {
		t.Fatalf("_history order: newest %v, oldest %v", newest["description"], oldest["description"])
	}
	r = do(t, "GET", base+"/"+id+"/_history/"+v1, "", "", alice...)
	if r.status != 200 || r.json(t)["description"] != "from Medplum" || r.header.Get("ETag") != `W/"`+v1+`"` {
		t.Fatalf("vread: %d %s", r.status, r.body)
	}

	for body, field := range map[string]string{
		`{"resourceType":"Bot","name":"x","unknownElement":1}`:                      "unknownElement",
		`{"resourceType":"Bot","name":"x","cronString":"@hourly"}`:                  "cronString",
		`{"resourceType":"Bot","name":"x","cronTiming":{"repeat":{"frequency":2}}}`: "cronTiming.repeat.frequency",
	} {
		if r := do(t, "POST", base, "application/fhir+json", body, alice...); r.status != 400 || !strings.Contains(string(r.body), field) {
			t.Errorf("%s: %d %s; want a 400 naming %s", body, r.status, r.body, field)
		}
	}
}

// TestBotCronRunsOnTheMinute: a bot with cronString "* * * * *" runs at
// the next minute with the Bot as its input and the tick in its headers
// (waits for up to a minute and a bit: cron's finest tick).
func TestBotCronRunsOnTheMinute(t *testing.T) {
	s := startStack(t, "")
	alice := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	id := createCronBot(t, s, alice)
	checkCronTicks(t, s, id, 1, 90*time.Second)
	// The run had no request: its AuditEvent still reached the backend
	// (auditEventDestination resource), through the request-less route.
	s.backend.mu.Lock()
	defer s.backend.mu.Unlock()
	for _, req := range s.backend.requests {
		if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/AuditEvent") {
			return
		}
	}
	t.Fatal("the scheduled run's AuditEvent was not written to the backend")
}

// TestReplicasRunEachCronTickOnce: two Caddy replicas on one PostgreSQL
// database each scan for scheduled bots and run ticks; every tick of a
// "* * * * *" bot runs once in all (two ticks: up to two minutes).
func TestReplicasRunEachCronTickOnce(t *testing.T) {
	rp := startReplicaPair(t)
	alice := bearer(rp.a.token(t, "alpha-app", "alice-token"))
	id := createCronBot(t, rp.a, alice)
	checkCronTicks(t, rp.b, id, 2, 150*time.Second)
}

const cronTickLine = "cron Bot/minutely application/fhir+json tick="

// createCronBot creates and deploys a bot that runs every minute and logs
// its input's type and name, its content type and its tick.
func createCronBot(t *testing.T, s *stack, auth []string) string {
	t.Helper()
	base := s.gateway + "/fhir/R4/Bot"
	r := do(t, "POST", base, "application/fhir+json", `{"resourceType":"Bot","name":"minutely","cronString":"* * * * *","auditEventDestination":["resource"]}`, auth...)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id := r.json(t)["id"].(string)
	code := `exports.handler = async (medplum, event) => {
		console.log('cron ' + event.input.resourceType + '/' + event.input.name + ' ' + event.contentType + ' tick=' + event.headers['x-fhirgate-cron-tick']);
	};`
	if r := do(t, "POST", base+"/"+id+"/$deploy", "application/json", mustJSON(t, map[string]string{"code": code, "filename": "index.js"}), auth...); r.status != 200 {
		t.Fatalf("deploy: %d %s", r.status, r.body)
	}
	return id
}

// checkCronTicks waits until the bot's AuditEvents (read on s's admin API)
// show n scheduled runs, and checks that each is a whole-minute tick run
// once.
func checkCronTicks(t *testing.T, s *stack, id string, n int, wait time.Duration) {
	t.Helper()
	deadline := time.Now().Add(wait)
	var entries []any
	for len(entries) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d scheduled runs after %s, want %d", len(entries), wait, n)
		}
		time.Sleep(time.Second)
		r := do(t, "GET", "http://"+s.adminAddr+"/fhirgate/AuditEvent?bot="+id, "", "")
		if r.status == 200 {
			entries, _ = r.json(t)["entry"].([]any)
		}
	}
	ticks := map[string]bool{}
	for _, e := range entries {
		desc, _ := e.(map[string]any)["resource"].(map[string]any)["outcomeDesc"].(string)
		tick, ok := strings.CutPrefix(strings.TrimSpace(desc), cronTickLine)
		if !ok {
			t.Fatalf("scheduled run's console %q, want %q…", desc, cronTickLine)
		}
		at, err := time.Parse(time.RFC3339, tick)
		if err != nil || at.Second() != 0 || ticks[tick] {
			t.Fatalf("tick %q not a whole minute or run twice (%v)", tick, ticks)
		}
		ticks[tick] = true
	}
}

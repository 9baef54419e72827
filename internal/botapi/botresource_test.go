package botapi

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
)

// medplumBotJSON has every element of Medplum's Bot that a client may set
// (runAsUser aside), fhirgate's settings as extensions.
const medplumBotJSON = `{
  "resourceType": "Bot",
  "meta": {"tag": [{"system": "https://ex.org/tags", "code": "nightly"}], "author": {"reference": "Practitioner/x"}},
  "implicitRules": "https://ex.org/rules",
  "language": "en",
  "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">Nightly</div>"},
  "extension": [
    {"url": "https://ex.org/owner", "valueString": "ops"},
    {"url": "https://fhirgate.dev/fhir/StructureDefinition/bot-secret", "extension": [{"url": "name", "valueString": "API_KEY"}, {"url": "value", "valueString": "bot-key"}]},
    {"url": "https://fhirgate.dev/fhir/StructureDefinition/bot-max-concurrent", "valueInteger": 3}
  ],
  "identifier": [{"system": "https://ex.org/bots", "value": "nightly"}],
  "name": "nightly",
  "description": "Runs at night",
  "runtimeVersion": "vmcontext",
  "timeout": 20,
  "photo": {"contentType": "image/png", "url": "https://ex.org/bot.png"},
  "cronString": "0 3 * * *",
  "category": [{"text": "Ops"}],
  "system": false,
  "publicWebhook": false,
  "webhookRawBodyEnabled": true,
  "streamingEnabled": false,
  "auditEventTrigger": "always",
  "auditEventDestination": ["resource"],
  "cdsService": {"hook": "patient-view", "title": "T", "description": "D", "prefetch": [{"key": "patient", "query": "Patient/{{context.patientId}}"}]},
  "code": "// deprecated"
}`

// TestMedplumBotRoundTripsThroughTheAPI: a Bot with Medplum's elements is
// created, read, updated, listed in _history and read by version through
// the gateway; its fhirgate settings act (the bot's secret reaches the
// run); unknown elements and bad schedules are 400s naming them.
func TestMedplumBotRoundTripsThroughTheAPI(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	tok := f.adminToken
	created := f.serve(t, tok, http.MethodPost, "/fhir/R4/Bot", medplumBotJSON)
	if created.status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	got := created.json(t)
	botID := got["id"].(string)
	var sent map[string]any
	if err := json.Unmarshal([]byte(medplumBotJSON), &sent); err != nil {
		t.Fatal(err)
	}
	for key, want := range sent {
		if key == "meta" {
			continue
		}
		if !reflect.DeepEqual(got[key], want) {
			t.Errorf("%s: got %v, sent %v", key, got[key], want)
		}
	}
	meta := got["meta"].(map[string]any)
	if meta["author"] != nil || !reflect.DeepEqual(meta["tag"], sent["meta"].(map[string]any)["tag"]) {
		t.Errorf("meta %v: want the tag kept and the author dropped", meta)
	}
	v1 := meta["versionId"].(string)

	// The bot's own secret (an extension) overrides the project's.
	if r := f.call(t, f.admin, http.MethodPost, "/fhir/R4/Bot/"+botID+"/$deploy",
		`{"code":"exports.handler = async (m, e) => e.secrets.API_KEY.valueString;","filename":"index.js"}`); r.status != http.StatusOK {
		t.Fatalf("deploy: %d %s", r.status, r.body)
	}
	if r := f.serve(t, tok, http.MethodPost, "/fhir/R4/Bot/"+botID+"/$execute", `{}`); r.status != http.StatusOK || r.body != "bot-key" {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	afterDeploy, err := store.Get[store.Bot](context.Background(), f.st, botID)
	if err != nil {
		t.Fatal(err)
	}

	updated := strings.Replace(medplumBotJSON, `"Runs at night"`, `"Runs at dawn"`, 1)
	if r := f.serve(t, tok, http.MethodPut, "/fhir/R4/Bot/"+botID, updated); r.status != http.StatusOK || r.json(t)["description"] != "Runs at dawn" {
		t.Fatalf("update: %d %s", r.status, r.body)
	}

	hist := f.serve(t, tok, http.MethodGet, "/fhir/R4/Bot/"+botID+"/_history", "")
	if hist.status != http.StatusOK {
		t.Fatalf("_history: %d %s", hist.status, hist.body)
	}
	h := hist.json(t)
	entries, _ := h["entry"].([]any)
	if h["type"] != "history" || len(entries) != 3 {
		t.Fatalf("_history: %d entries, want 3 (create, deploy, update): %.500s", len(entries), hist.body)
	}
	descriptions := []string{}
	versions := []string{}
	for _, e := range entries {
		res := e.(map[string]any)["resource"].(map[string]any)
		descriptions = append(descriptions, res["description"].(string))
		versions = append(versions, res["meta"].(map[string]any)["versionId"].(string))
	}
	if descriptions[0] != "Runs at dawn" || descriptions[2] != "Runs at night" || versions[1] != afterDeploy.Meta.VersionID || versions[2] != v1 {
		t.Fatalf("_history not newest first: %v %v", descriptions, versions)
	}

	vread := f.serve(t, tok, http.MethodGet, "/fhir/R4/Bot/"+botID+"/_history/"+v1, "")
	if vread.status != http.StatusOK || vread.json(t)["description"] != "Runs at night" || vread.header.Get("ETag") != `W/"`+v1+`"` {
		t.Fatalf("vread: %d %s %s", vread.status, vread.header.Get("ETag"), vread.body)
	}
	if r := f.serve(t, tok, http.MethodGet, "/fhir/R4/Bot/"+botID+"/_history/nope", ""); r.status != http.StatusNotFound {
		t.Fatalf("vread of an unknown version: %d %s", r.status, r.body)
	}
	if r := f.serve(t, f.memberToken, http.MethodGet, "/fhir/R4/Bot/"+botID+"/_history", ""); r.status != http.StatusForbidden {
		t.Fatalf("_history as a non-admin: %d %s", r.status, r.body)
	}

	for body, field := range map[string]string{
		`{"resourceType":"Bot","name":"b","colour":"red"}`:                             "colour",
		`{"resourceType":"Bot","name":"b","cronString":"61 * * * *"}`:                  "cronString",
		`{"resourceType":"Bot","name":"b","cronTiming":{"repeat":{"periodUnit":"h"}}}`: "cronTiming.repeat.periodUnit",
	} {
		r := f.serve(t, tok, http.MethodPost, "/fhir/R4/Bot", body)
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, field) {
			t.Errorf("%s: %d %s; want a 400 naming %s", body, r.status, r.body, field)
		}
	}
}

// TestAuditEventDestination: "resource" creates the run's AuditEvent on
// the backend through the run's backend route, "log" logs it, and the
// gateway's store keeps it either way; without the element only the store
// has it.
func TestAuditEventDestination(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	both := f.deployBot(t, &store.Bot{Name: "both", AuditEventDestination: []string{"resource", "log"}},
		`exports.handler = async () => { console.log('hello'); return 1; };`)
	plain := f.deployBot(t, &store.Bot{Name: "plain"}, `exports.handler = async () => 2;`)
	for _, b := range []*store.Bot{both, plain} {
		if r := f.serve(t, f.adminToken, http.MethodPost, "/fhir/R4/Bot/"+b.ID+"/$execute", `{}`); r.status != http.StatusOK {
			t.Fatalf("execute %s: %d %s", b.Name, r.status, r.body)
		}
	}
	var posted []map[string]any
	for _, req := range f.backendRequests() {
		if req.Method == http.MethodPost && req.Path == "/fhir/R4/AuditEvent" {
			var ev map[string]any
			if err := json.Unmarshal([]byte(req.Body), &ev); err != nil {
				t.Fatal(err)
			}
			posted = append(posted, ev)
		}
	}
	if len(posted) != 1 {
		t.Fatalf("%d AuditEvents posted to the backend, want 1 (the bot with destination resource)", len(posted))
	}
	ev := posted[0]
	entity := ev["entity"].([]any)[0].(map[string]any)["what"].(map[string]any)["reference"]
	agent := ev["agent"].([]any)[0].(map[string]any)["who"].(map[string]any)["reference"]
	if ev["resourceType"] != "AuditEvent" || entity != "Bot/"+both.ID || agent != "Practitioner/alice" || ev["meta"] != nil || ev["recorded"] == "" ||
		!strings.Contains(ev["outcomeDesc"].(string), "hello") {
		t.Fatalf("posted AuditEvent %v", ev)
	}
	logged := f.logs.FilterMessage("bot audit event").All()
	if len(logged) != 1 || logged[0].ContextMap()["bot"] != "Bot/"+both.ID || !strings.Contains(logged[0].ContextMap()["outcome_desc"].(string), "hello") {
		t.Fatalf("logged %v, want the one run of the bot with destination log", logged)
	}
	f.api.Shutdown()
	for _, b := range []*store.Bot{both, plain} {
		if n := len(f.auditEventsOf(t, b.ID)); n != 1 {
			t.Fatalf("%s: %d AuditEvents in the gateway's store, want 1", b.Name, n)
		}
	}
}

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/subscription/subscriptiontest"
)

// subscriptionsCaddyfile is the stack's with subscriptions on, a bot that
// logs its deliveries, and the searching stand-in as the backend.
func subscriptionsCaddyfile(backendURL string) string {
	tmpl := strings.Replace(stackCaddyfile, "\t\tmax_body 64KB\n", "\t\tmax_body 64KB\n\t\tsubscriptions on\n", 1)
	tmpl = strings.Replace(tmpl, "reverse_proxy {{.Backend}}", "reverse_proxy "+backendURL, 1)
	return strings.Replace(tmpl, "\t\t\tbot echo {", "\t\t\tbot subscriber {\n\t\t\t\tidentifier https://example.com/bots|subscriber\n\t\t\t\tsource {{.Testdata}}/subscriber.ts\n\t\t\t}\n\t\t\tbot echo {", 1)
}

// deliveries are the inputs the subscriber bot logged, from its AuditEvents.
func (s *stack) deliveries(t *testing.T, botID string, want int) []map[string]any {
	t.Helper()
	var out []map[string]any
	s.auditEvents(t, botID, func(entries []any) bool {
		out = out[:0]
		for _, e := range entries {
			desc, _ := e.(map[string]any)["resource"].(map[string]any)["outcomeDesc"].(string)
			_, logged, ok := strings.Cut(desc, "DELIVERED ")
			if !ok {
				continue
			}
			logged, _, _ = strings.Cut(logged, "\n")
			var d map[string]any
			if json.Unmarshal([]byte(logged), &d) == nil {
				out = append(out, d)
			}
		}
		return len(out) >= want
	})
	return out
}

func TestSubscriptionsRunBotsOnWritesThroughTheGate(t *testing.T) {
	be := subscriptiontest.NewFHIR(t)
	s := startStackWith(t, subscriptionsCaddyfile(be.URL), "")
	alice := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	botID := s.botID(t, "alpha", "https://example.com/bots|subscriber")
	fhirBase := s.gateway + "/fhir/R4"
	interaction := func(code string) string {
		return `{"url":"https://medplum.com/fhir/StructureDefinition/subscription-supported-interaction","valueCode":"` + code + `"}`
	}
	sub := func(criteria string, exts ...string) string {
		r := do(t, "POST", fhirBase+"/Subscription", "application/fhir+json",
			`{"resourceType":"Subscription","status":"active","reason":"test","criteria":"`+criteria+`","channel":{"type":"rest-hook","endpoint":"Bot/`+botID+`"},"extension":[`+strings.Join(exts, ",")+`]}`, alice...)
		if r.status != 201 {
			t.Fatalf("creating a Subscription: %d %s", r.status, r.body)
		}
		return r.json(t)["id"].(string)
	}

	// Unsupported is a 400 naming it.
	r := do(t, "POST", fhirBase+"/Subscription", "application/fhir+json",
		`{"resourceType":"Subscription","status":"active","criteria":"Patient","channel":{"type":"websocket"}}`, alice...)
	if r.status != 400 || !strings.Contains(string(r.body), "channel.type") {
		t.Fatalf("websocket channel: %d %s", r.status, r.body)
	}

	sub("Patient", interaction("create"))
	r = do(t, "POST", fhirBase+"/Patient", "application/fhir+json", `{"resourceType":"Patient","name":[{"family":"First"}]}`, alice...)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	pid := r.json(t)["id"].(string)
	got := s.deliveries(t, botID, 1)
	in, _ := got[0]["input"].(map[string]any)
	hdr, _ := json.Marshal(got[0]["headers"])
	if in["id"] != pid || !strings.Contains(strings.ToLower(string(hdr)), `"x-medplum-interaction":"create"`) {
		t.Fatalf("delivery %v", got[0])
	}

	// An update, and a create of another type, trigger nothing.
	if r := do(t, "PUT", fhirBase+"/Patient/"+pid, "application/fhir+json", `{"resourceType":"Patient","id":"`+pid+`"}`, alice...); r.status != 200 {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", fhirBase+"/Observation", "application/fhir+json", `{"resourceType":"Observation","status":"final"}`, alice...); r.status != 201 {
		t.Fatalf("observation: %d %s", r.status, r.body)
	}

	// A delete delivers the last version as {deletedResource}.
	sub("Patient", interaction("delete"))
	if r := do(t, "DELETE", fhirBase+"/Patient/"+pid, "", "", alice...); r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	got = s.deliveries(t, botID, 2)
	if len(got) != 2 {
		t.Fatalf("%d deliveries after an update, another type and a delete, want 2: %v", len(got), got)
	}
	del := got[0]
	if _, ok := del["input"].(map[string]any)["deletedResource"]; !ok {
		del = got[1]
	}
	if dr, _ := del["input"].(map[string]any)["deletedResource"].(map[string]any); dr == nil || dr["id"] != pid {
		t.Fatalf("delete delivery %v", got)
	}

	// A transaction of three creates runs the bot three times.
	tx := `{"resourceType":"Bundle","type":"transaction","entry":[` +
		`{"resource":{"resourceType":"Patient","name":[{"family":"Tx"}]},"request":{"method":"POST","url":"Patient"}},` +
		`{"resource":{"resourceType":"Patient","name":[{"family":"Tx"}]},"request":{"method":"POST","url":"Patient"}},` +
		`{"resource":{"resourceType":"Patient","name":[{"family":"Tx"}]},"request":{"method":"POST","url":"Patient"}}]}`
	if r := do(t, "POST", fhirBase, "application/fhir+json", tx, alice...); r.status != 200 {
		t.Fatalf("transaction: %d %s", r.status, r.body)
	}
	if got = s.deliveries(t, botID, 5); len(got) != 5 {
		t.Fatalf("%d deliveries after a transaction of three, want 5", len(got))
	}
	time.Sleep(time.Second) // no late extra run
	if got = s.deliveries(t, botID, 5); len(got) != 5 {
		t.Fatalf("%d deliveries, want 5: %v", len(got), got)
	}

	// Parameters are decided by the backend's search.
	special := sub("Patient?family=Special", interaction("create"))
	for _, family := range []string{"Plain", "Special"} {
		if r := do(t, "POST", fhirBase+"/Patient", "application/fhir+json", `{"resourceType":"Patient","name":[{"family":"`+family+`"}]}`, alice...); r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
	}
	got = s.deliveries(t, botID, 8)
	time.Sleep(time.Second)
	got = s.deliveries(t, botID, 8)
	var bySpecial []string
	for _, d := range got {
		h, _ := json.Marshal(d["headers"])
		if strings.Contains(strings.ToLower(string(h)), strings.ToLower(`"x-medplum-subscription":"`+special+`"`)) {
			in, _ := json.Marshal(d["input"])
			bySpecial = append(bySpecial, string(in))
		}
	}
	if len(got) != 8 || len(bySpecial) != 1 || !strings.Contains(bySpecial[0], "Special") {
		t.Fatalf("%d deliveries, %d by the Subscription with parameters: %v", len(got), len(bySpecial), bySpecial)
	}
}

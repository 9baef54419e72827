package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestEgressBotFetch runs, on the built Caddy with bots in worker processes, a bot whose
// project's egress (set through the admin API) allows one loopback host: the bot reaches it,
// is refused a host not on the list and a listed name that resolves to 127.0.0.1, and its
// AuditEvent counts the three calls. Removing the entry refuses the next run's fetch.
func TestEgressBotFetch(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"from":"target"}`)
	}))
	defer target.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "must not be reached")
	}))
	defer other.Close()
	host := strings.TrimPrefix(target.URL, "http://")
	port := host[strings.LastIndex(host, ":")+1:]

	s := startStack(t, "")
	setEgress := func(egress map[string]any) {
		t.Helper()
		var p map[string]any
		if err := json.Unmarshal(s.adminCall(t, "GET", "/fhirgate/Project/alpha", "").body, &p); err != nil {
			t.Fatal(err)
		}
		p["egress"] = egress
		delete(p, "meta")
		s.adminCall(t, "PUT", "/fhirgate/Project/alpha", mustJSON(t, p))
	}
	setEgress(map[string]any{"allowHttp": []string{host, "localhost:" + port}})

	id := s.deployBot(t, "alpha", "fetcher", `export async function handler() {
  const failed = (u: string) => fetch(u).then(() => 'reached', (e: Error) => e.message);
  const [ok, refused, loopbackName] = await Promise.all([
    fetch('`+target.URL+`/data').then((r) => r.json()),
    failed('`+other.URL+`/'),
    failed('http://localhost:`+port+`/'),
  ]);
  return { ok, refused, loopbackName };
}`)
	auth := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	r := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+id+"/$execute", "application/json", `{}`, auth...)
	if r.status != 200 {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	var got struct {
		Ok                    map[string]string
		Refused, LoopbackName string
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	if got.Ok["from"] != "target" {
		t.Errorf("allowed host: %s", r.body)
	}
	if !strings.Contains(got.Refused, "not on the project's egress allow-list") {
		t.Errorf("host not on the list: %q", got.Refused)
	}
	if !strings.Contains(got.LoopbackName, "resolves to 127.0.0.1, a loopback address") && !strings.Contains(got.LoopbackName, "resolves to ::1, a loopback address") {
		t.Errorf("listed name resolving to loopback: %q", got.LoopbackName)
	}

	entries := s.auditEvents(t, id, func(entries []any) bool { return len(entries) == 1 })
	audit := mustJSON(t, entries[0])
	if !strings.Contains(audit, `"url":"https://fhirgate.dev/fhir/StructureDefinition/bot-fetch"`) ||
		!strings.Contains(audit, `{"url":"count","valueInteger":3}`) || !strings.Contains(audit, `"valueCode":"`+host+`"`) {
		t.Errorf("AuditEvent without the fetch calls: %s", audit)
	}

	setEgress(map[string]any{"allowHttp": []string{"localhost:" + port}})
	// The allowed fetch now rejects, which rejects Promise.all: the run is a 400 naming why.
	r = do(t, "POST", s.gateway+"/fhir/R4/Bot/"+id+"/$execute", "application/json", `{}`, auth...)
	if r.status != 400 || !strings.Contains(string(r.body), "egress to "+host+" refused: not on the project's egress allow-list") {
		t.Errorf("after removing the host: %d %s", r.status, r.body)
	}
}

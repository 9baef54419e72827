package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/subscription/subscriptiontest"
)

// setEgress replaces project alpha's egress allow-list (the Project
// record's egress) through the admin API.
func (s *stack) setEgress(t *testing.T, egress map[string]any) {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(s.adminCall(t, "GET", "/fhirgate/Project/alpha", "").body, &p); err != nil {
		t.Fatal(err)
	}
	p["egress"] = egress
	delete(p, "meta")
	s.adminCall(t, "PUT", "/fhirgate/Project/alpha", mustJSON(t, p))
}

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
	s.setEgress(t, map[string]any{"allowHttp": []string{host, "localhost:" + port}})

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

	s.setEgress(t, map[string]any{"allowHttp": []string{"localhost:" + port}})
	// The allowed fetch now rejects, which rejects Promise.all: the run is a 400 naming why.
	r = do(t, "POST", s.gateway+"/fhir/R4/Bot/"+id+"/$execute", "application/json", `{}`, auth...)
	if r.status != 400 || !strings.Contains(string(r.body), "egress to "+host+" refused: not on the project's egress allow-list") {
		t.Errorf("after removing the host: %d %s", r.status, r.body)
	}
}

// TestEgressWebhooks: with subscriptions on, a Subscription's webhook reaches a host on the
// project's allow-list with a body whose X-Signature verifies, while one to a host not on it and
// one to a listed name resolving to 127.0.0.1 are refused and switched off with the reason.
func TestEgressWebhooks(t *testing.T) {
	type hook struct {
		body      []byte
		signature string
	}
	hooks := make(chan hook, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hooks <- hook{b, r.Header.Get("X-Signature")}
	}))
	defer receiver.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a host not on the allow-list got %s %s", r.Method, r.URL)
	}))
	defer other.Close()
	host := strings.TrimPrefix(receiver.URL, "http://")
	port := host[strings.LastIndex(host, ":")+1:]

	be := subscriptiontest.NewFHIR(t)
	s := startStackWith(t, subscriptionsCaddyfile(be.URL), "")
	s.setEgress(t, map[string]any{"allowHttp": []string{host, "localhost:" + port}})

	token := s.token(t, "alpha-app", "alice-token")
	alice := bearer(token)
	fhirBase := s.gateway + "/fhir/R4"
	const secret = "webhook-secret"
	sub := func(endpoint string) string {
		t.Helper()
		return subscribe(t, s.gateway, token, "Patient", endpoint,
			`{"url":"https://www.medplum.com/fhir/StructureDefinition/subscription-secret","valueString":"`+secret+`"}`, maxAttempts(1))
	}
	sub(receiver.URL + "/hook")
	refused := sub(other.URL + "/hook")
	loopbackName := sub("http://localhost:" + port + "/hook")

	if r := do(t, "POST", fhirBase+"/Patient", "application/fhir+json", `{"resourceType":"Patient","name":[{"family":"Hooked"}]}`, alice...); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	select {
	case h := <-hooks:
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(h.body)
		if want := hex.EncodeToString(mac.Sum(nil)); h.signature != want || !strings.Contains(string(h.body), "Hooked") {
			t.Errorf("webhook body %s signed %q, want %q", h.body, h.signature, want)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the allowed webhook was not delivered")
	}

	for id, reason := range map[string]string{
		refused:      "not on the project's egress allow-list",
		loopbackName: "resolves to",
	} {
		deadline := time.Now().Add(15 * time.Second)
		for {
			got := do(t, "GET", fhirBase+"/Subscription/"+id, "", "", alice...).json(t)
			errText := mustJSON(t, got["error"])
			if got["status"] == "off" {
				if !strings.Contains(errText, reason) {
					t.Errorf("Subscription %s switched off for %s, want %q", id, errText, reason)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Subscription %s still %v", id, got["status"])
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	select {
	case h := <-hooks:
		t.Errorf("a second delivery reached the receiver (through localhost?): %s", h.body)
	default:
	}
}

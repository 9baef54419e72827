package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestBotUsesTheFHIRBackend is issue 5's acceptance test: a bot reads a
// Patient from the backend behind the gateway, creates an Observation in
// it, and returns the result; the backend sees the bot's own identity
// (Bot/{id}: it runs as itself, as Medplum's bots do by default) and the
// run's trace id, never the caller's token.
func TestBotUsesTheFHIRBackend(t *testing.T) {
	s := startStack(t, "")
	alice := s.token(t, "alpha-app", "alice-token")
	u := s.gateway + "/fhir/R4/Bot/$execute?identifier=" + url.QueryEscape("https://example.com/bots|fhirclient")

	r := do(t, "POST", u, "application/json", `{"patientId":"p-42"}`,
		"Authorization", "Bearer "+alice, "X-Trace-Id", "7b2e1f5e-3c1d-4c55-9d8e-1a2b3c4d5e6f")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	obs := r.json(t)
	if obs["resourceType"] != "Observation" || obs["id"] != "new-1" ||
		obs["subject"].(map[string]any)["reference"] != "Patient/p-42" {
		t.Fatalf("bot result %s", r.body)
	}
	if !strings.HasPrefix(r.header.Get("Content-Type"), "application/fhir+json") {
		t.Fatalf("content type %q", r.header.Get("Content-Type"))
	}
	s.backend.mu.Lock()
	reqs := append([]*http.Request(nil), s.backend.requests...)
	s.backend.mu.Unlock()
	if len(reqs) != 2 || reqs[0].Method != "GET" || reqs[0].URL.Path != "/fhir/R4/Patient/p-42" ||
		reqs[1].Method != "POST" || reqs[1].URL.Path != "/fhir/R4/Observation" {
		t.Fatalf("backend saw %d requests: %v", len(reqs), reqs)
	}
	for _, req := range reqs {
		if req.Header.Get("X-Fhirgate-Profile") != "Bot/"+s.botID(t, "alpha", "https://example.com/bots|fhirclient") || req.Header.Get("X-Fhirgate-Project") != "alpha" {
			t.Fatalf("identity headers %v", req.Header)
		}
		if req.Header.Get("X-Trace-Id") != "7b2e1f5e-3c1d-4c55-9d8e-1a2b3c4d5e6f" {
			t.Fatalf("trace id %q", req.Header.Get("X-Trace-Id"))
		}
		if req.Header.Get("Authorization") != "" {
			t.Fatal("the caller's token reached the backend")
		}
	}

	// A backend error rejects the bot's promise with Medplum's message.
	r = do(t, "POST", u, "application/json", `{"patientId":"missing"}`, "Authorization", "Bearer "+alice)
	if r.status != 400 || !strings.Contains(string(r.body), "Not found") {
		t.Fatalf("missing patient: %d %s", r.status, r.body)
	}
}

// TestBotCallsBot runs medplum.executeBot from inside a bot: the called bot
// is found in the caller's project, and a bot that calls itself stops at
// the depth limit with a clear error.
func TestBotCallsBot(t *testing.T) {
	s := startStack(t, "")
	auth := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	u := s.gateway + "/fhir/R4/Bot/$execute?identifier=" + url.QueryEscape("https://example.com/bots|caller")
	r := do(t, "POST", u, "application/json", `{"mode":"echo"}`, auth...)
	if r.status != 200 || string(r.body) != `{"echoed":{"hello":"from caller"}}` {
		t.Fatalf("%d %s", r.status, r.body)
	}
	r = do(t, "POST", u, "application/json", `{"mode":"self"}`, auth...)
	if r.status != 400 || !strings.Contains(string(r.body), "at most 5 deep") {
		t.Fatalf("self-calling bot: %d %s", r.status, r.body)
	}
}

package e2e

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"
)

const hl7ADT = "MSH|^~\\&|EPIC|HOSP|LAB|HOSP|20240101120000||ADT^A01|MSG00001|P|2.5.1\r" +
	"PID|1||12345^^^HOSP^MR||DOE^JOHN^Q||19800101|M\r" +
	"PV1|1|I|ICU^101^A\r"

// botID finds a bot's id through the admin API.
func (s *stack) botID(t *testing.T, project, identifier string) string {
	t.Helper()
	q := url.Values{"project": {project}, "identifier": {identifier}}
	r := do(t, "GET", "http://"+s.adminAddr+"/fhirgate/Bot?"+q.Encode(), "", "")
	entries, _ := r.json(t)["entry"].([]any)
	if len(entries) != 1 {
		t.Fatalf("bot %s in %s: %s", identifier, project, r.body)
	}
	return entries[0].(map[string]any)["resource"].(map[string]any)["id"].(string)
}

// auditEvents polls the admin API for a bot's AuditEvents until done accepts the entries, and
// returns them; audit entries are written in the background, in batches.
func (s *stack) auditEvents(t *testing.T, botID string, done func(entries []any) bool) []any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := do(t, "GET", "http://"+s.adminAddr+"/fhirgate/AuditEvent?bot="+botID, "", "")
		if r.status == 200 {
			entries, _ := r.json(t)["entry"].([]any)
			if done(entries) {
				return entries
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit events for %s: %d %s", botID, r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestBotExecuteContentTypes(t *testing.T) {
	s := startStack(t, "bot_timeout 1s")
	alice := s.token(t, "alpha-app", "alice-token")
	echoID := s.botID(t, "alpha", "https://example.com/bots|echo")
	byID := s.gateway + "/fhir/R4/Bot/" + echoID + "/$execute"
	byIdent := s.gateway + "/fhir/R4/Bot/$execute?identifier=" + url.QueryEscape("https://example.com/bots|echo")
	auth := []string{"Authorization", "Bearer " + alice}

	tests := []struct {
		name, contentType, body string
		wantType                string
		check                   func(t *testing.T, body string)
	}{
		{"text", "text/plain", "hello bot", "text/plain", func(t *testing.T, b string) {
			if b != "hello bot" {
				t.Fatalf("body %q", b)
			}
		}},
		{"text with charset", "text/plain; charset=utf-8", "héllo", "text/plain", func(t *testing.T, b string) {
			if b != "héllo" {
				t.Fatalf("body %q", b)
			}
		}},
		{"json", "application/json", `{"a":1,"b":[true,null]}`, "application/json", func(t *testing.T, b string) {
			if b != `{"a":1,"b":[true,null]}` {
				t.Fatalf("body %q", b)
			}
		}},
		{"form", "application/x-www-form-urlencoded", "name=Jo+Doe&age=42", "application/json", func(t *testing.T, b string) {
			var m map[string]string
			if err := json.Unmarshal([]byte(b), &m); err != nil || m["name"] != "Jo Doe" || m["age"] != "42" {
				t.Fatalf("body %q", b)
			}
		}},
		{"fhir json", "application/fhir+json", `{"resourceType":"Patient","id":"p1"}`, "application/fhir+json", func(t *testing.T, b string) {
			if !strings.Contains(b, `"resourceType":"Patient"`) {
				t.Fatalf("body %q", b)
			}
		}},
		{"hl7", "x-application/hl7-v2+er7", hl7ADT, "x-application/hl7-v2+er7", func(t *testing.T, b string) {
			if !strings.HasPrefix(b, "MSH|^~\\&|EPIC|HOSP") || !strings.Contains(b, "PID|1||12345^^^HOSP^MR||DOE^JOHN^Q") {
				t.Fatalf("body %q", b)
			}
		}},
		{"hl7 with LF separators", "x-application/hl7-v2+er7", strings.ReplaceAll(hl7ADT, "\r", "\n"), "x-application/hl7-v2+er7", func(t *testing.T, b string) {
			if !strings.Contains(b, "ADT^A01") {
				t.Fatalf("body %q", b)
			}
		}},
	}
	for _, tt := range tests {
		for _, target := range []struct{ name, url string }{{"by id", byID}, {"by identifier", byIdent}} {
			t.Run(tt.name+" "+target.name, func(t *testing.T) {
				r := do(t, "POST", target.url, tt.contentType, tt.body, auth...)
				if r.status != 200 {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
					t.Fatalf("content type %q, want %s", ct, tt.wantType)
				}
				tt.check(t, string(r.body))
			})
		}
	}

	t.Run("GET passes the query as input", func(t *testing.T) {
		r := do(t, "GET", byID+"?patient=123&mode=fast", "", "", auth...)
		var m map[string]string
		if r.status != 200 || json.Unmarshal(r.body, &m) != nil || m["patient"] != "123" || m["mode"] != "fast" {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("URL-encoded $execute and identifier", func(t *testing.T) {
		u := s.gateway + "/fhir/R4/Bot/%24execute?identifier=https%3A%2F%2Fexample.com%2Fbots%7Cecho"
		if r := do(t, "POST", u, "text/plain", "x", auth...); r.status != 200 || string(r.body) != "x" {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("extra path after $execute", func(t *testing.T) {
		if r := do(t, "POST", byID+"/extra/path", "text/plain", "y", auth...); r.status != 200 || string(r.body) != "y" {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	if n := s.backend.count.Load(); n != 0 {
		t.Fatalf("bot requests reached the backend %d times", n)
	}
}

func TestBotExecuteErrors(t *testing.T) {
	s := startStack(t, "bot_timeout 1s")
	alice := s.token(t, "alpha-app", "alice-token")
	bob := s.token(t, "beta-app", "bob-token")
	alphaEcho := s.botID(t, "alpha", "https://example.com/bots|echo")
	misbehave := s.botID(t, "alpha", "https://example.com/bots|misbehave")
	base := s.gateway + "/fhir/R4/Bot/"

	tests := []struct {
		name, method, url, token, contentType, body string
		status                                      int
		contains                                    string
	}{
		{"no token", "POST", base + alphaEcho + "/$execute", "", "text/plain", "x", 401, ""},
		{"no id or identifier", "POST", base + "$execute", alice, "text/plain", "x", 400, "Must specify bot ID or identifier."},
		{"unknown id", "POST", base + "nope/$execute", alice, "text/plain", "x", 404, "not found"},
		{"another project's bot by id", "POST", base + alphaEcho + "/$execute", bob, "text/plain", "x", 404, "not found"},
		{"unknown identifier", "POST", base + "$execute?identifier=https://example.com/bots|nope", alice, "text/plain", "x", 404, ""},
		{"unsupported type", "POST", base + alphaEcho + "/$execute", alice, "application/xml", "<a/>", 415, "text/plain"},
		{"too large", "POST", base + alphaEcho + "/$execute", alice, "text/plain", strings.Repeat("a", 70_000), 413, ""},
		{"bad json", "POST", base + alphaEcho + "/$execute", alice, "application/json", `{"a":`, 400, ""},
		{"json scalar", "POST", base + alphaEcho + "/$execute", alice, "application/json", `42`, 400, ""},
		{"unknown resourceType", "POST", base + alphaEcho + "/$execute", alice, "application/fhir+json", `{"resourceType":"Pationt"}`, 400, "Pationt"},
		{"repeated form key", "POST", base + alphaEcho + "/$execute", alice, "application/x-www-form-urlencoded", "a=1&a=2", 400, "a"},
		{"not hl7", "POST", base + alphaEcho + "/$execute", alice, "x-application/hl7-v2+er7", "PID|1", 400, "MSH"},
		{"wrong method", "DELETE", base + alphaEcho + "/$execute", alice, "", "", 405, ""},
		{"bot throws", "POST", base + misbehave + "/$execute", alice, "application/json", `{"what":"throw"}`, 400, "bot failed on purpose"},
		{"bot loops after await", "POST", base + misbehave + "/$execute", alice, "application/json", `{"what":"loop"}`, 400, "timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var headers []string
			if tt.token != "" {
				headers = []string{"Authorization", "Bearer " + tt.token}
			}
			start := time.Now()
			r := do(t, tt.method, tt.url, tt.contentType, tt.body, headers...)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("took %v", time.Since(start))
			}
			if !strings.Contains(string(r.body), `"OperationOutcome"`) {
				t.Fatalf("error body is not an OperationOutcome: %s", r.body)
			}
			if tt.contains != "" && !strings.Contains(string(r.body), tt.contains) {
				t.Fatalf("body does not mention %q: %s", tt.contains, r.body)
			}
		})
	}

	t.Run("same identifier resolves to each caller's own bot", func(t *testing.T) {
		u := base + "$execute?identifier=" + url.QueryEscape("https://example.com/bots|echo")
		a := do(t, "POST", u, "application/json", `{"k":"v"}`, "Authorization", "Bearer "+alice)
		b := do(t, "POST", u, "application/json", `{"k":"v"}`, "Authorization", "Bearer "+bob)
		if string(a.body) != `{"k":"v"}` || string(b.body) != `{"ok":true}` {
			t.Fatalf("alpha answered %s, beta answered %s", a.body, b.body)
		}
	})
	t.Run("credentials never reach the bot", func(t *testing.T) {
		r := do(t, "POST", base+misbehave+"/$execute", "application/json", `{"what":"headers"}`,
			"Authorization", "Bearer "+alice, "Cookie", "session=secret", "X-Custom", "kept")
		var h map[string]string
		if r.status != 200 || json.Unmarshal(r.body, &h) != nil {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if _, ok := h["authorization"]; ok || h["cookie"] != "" || h["x-custom"] != "kept" {
			t.Fatalf("headers seen by the bot: %v", h)
		}
	})
	t.Run("other bots answer while one loops", func(t *testing.T) {
		done := make(chan response, 1)
		go func() {
			done <- do(t, "POST", base+misbehave+"/$execute", "application/json", `{"what":"loop"}`, "Authorization", "Bearer "+alice)
		}()
		time.Sleep(100 * time.Millisecond)
		if r := do(t, "POST", base+alphaEcho+"/$execute", "text/plain", "still here", "Authorization", "Bearer "+alice); r.status != 200 {
			t.Fatalf("echo during a loop: %d %s", r.status, r.body)
		}
		if r := <-done; r.status != 400 {
			t.Fatalf("looping bot: %d %s", r.status, r.body)
		}
	})
	t.Run("audit_event_trigger on-error records failed runs only", func(t *testing.T) {
		quiet := s.botID(t, "alpha", "https://example.com/bots|quiet")
		for _, run := range []struct {
			input  string
			status int
		}{{`{}`, 200}, {`{}`, 200}, {`{"what":"throw"}`, 400}} {
			if r := do(t, "POST", base+quiet+"/$execute", "application/json", run.input, "Authorization", "Bearer "+alice); r.status != run.status {
				t.Fatalf("run with %s: %d %s", run.input, r.status, r.body)
			}
		}
		// Audit entries are written in order, so the failure's entry comes after any the
		// successes could have left.
		entries := s.auditEvents(t, quiet, func(entries []any) bool { return len(entries) > 0 })
		if len(entries) != 1 || !strings.Contains(mustJSON(t, entries[0]), "bot failed on purpose") {
			t.Fatalf("audit events of the on-error bot: %d, want only the failure's: %v", len(entries), entries)
		}
	})
	t.Run("runs are audited", func(t *testing.T) {
		s.auditEvents(t, misbehave, func(entries []any) bool {
			all := mustJSON(t, entries)
			return strings.Contains(all, `"outcome":"4"`) && strings.Contains(all, "bot failed on purpose") &&
				strings.Contains(all, `"outcome":"0"`) && strings.Contains(all, "Practitioner/alice")
		})
	})
}

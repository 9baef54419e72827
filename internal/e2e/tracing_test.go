package e2e

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var traceparentRe = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$`)

// TestTracingReachesBotBackendAndAudit is issue 20 item 5's tracing: with
// Caddy's tracing directive in front, the W3C trace the request is part of
// reaches the bot as event.traceId, the backend through the bot's medplum
// calls (as a child span of the same trace), and the run's AuditEvent. A
// caller's own traceparent keeps its trace id throughout.
func TestTracingReachesBotBackendAndAudit(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "none") // spans are made, not exported
	tmpl := strings.Replace(stackCaddyfile, "\tfhirgate {\n\t\tfhir_base /fhir/R4", "\ttracing\n\tfhirgate {\n\t\tfhir_base /fhir/R4", 1)
	if tmpl == stackCaddyfile {
		t.Fatal("the stack's site block changed: tracing was not added")
	}
	s := startStackWith(t, tmpl, "")
	alice := s.token(t, "alpha-app", "alice-token")
	botID := s.botID(t, "alpha", "https://example.com/bots|fhirclient")
	execute := s.gateway + "/fhir/R4/Bot/$execute?identifier=" + url.QueryEscape("https://example.com/bots|fhirclient")

	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, tc := range []struct {
		name      string
		header    []string
		wantTrace string
	}{
		{"a trace Caddy starts", nil, ""},
		{"the caller's trace", []string{"Traceparent", "00-" + callerTrace + "-00f067aa0ba902b7-01"}, callerTrace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.backend.count.Load()
			r := do(t, "POST", execute, "application/json", `{"patientId":"p1"}`,
				append([]string{"Authorization", "Bearer " + alice}, tc.header...)...)
			if r.status != 200 {
				t.Fatalf("$execute: %d %s", r.status, r.body)
			}
			runTrace := r.header.Get("X-Trace-Id")
			m := traceparentRe.FindStringSubmatch(runTrace)
			if m == nil {
				t.Fatalf("the run's trace id %q is not the request's traceparent", runTrace)
			}
			if tc.wantTrace != "" && m[1] != tc.wantTrace {
				t.Fatalf("trace %s, want the caller's %s", m[1], tc.wantTrace)
			}
			// The bot's read of Patient/p1 reached the backend in the same trace.
			var read string
			s.backend.mu.Lock()
			for _, req := range s.backend.requests[before:] {
				if strings.HasSuffix(req.URL.Path, "/Patient/p1") {
					read = req.Header.Get("Traceparent")
				}
			}
			s.backend.mu.Unlock()
			rm := traceparentRe.FindStringSubmatch(read)
			if rm == nil || rm[1] != m[1] || rm[2] == m[2] {
				t.Fatalf("the backend got traceparent %q for a run in %q: want the same trace, a new span", read, runTrace)
			}
			s.auditEvents(t, botID, func(entries []any) bool {
				for _, e := range entries {
					raw, _ := json.Marshal(e)
					if strings.Contains(string(raw), runTrace) {
						return true
					}
				}
				return false
			})
		})
	}
}

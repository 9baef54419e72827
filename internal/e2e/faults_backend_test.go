package e2e

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The FHIR backend fault suite: the backend behind reverse_proxy is down,
// resets, hangs up or is slower than the proxy's response_header_timeout.
// Caddy answers 502 or 504 itself, and that answer must carry neither the
// caller's token nor the identity headers fhirgate added for the backend.

var backendFaultsCaddyfile = alphaCaddyfile(aliceAdmin+`			bot fhirclient {
				identifier https://example.com/bots|fhirclient
				source {{.Testdata}}/fhirclient.ts
			}
`, `http://localhost:{{.Gateway}} {
	fhirgate {
		fhir_base /fhir/R4
	}
	reverse_proxy {{.Backend}} {
		transport http {
			response_header_timeout 500ms
		}
	}
}
`)

// fakeBackend is a FHIR server whose behaviour the test switches; healthy,
// it answers reads and creates and remembers the identity headers it got.
type fakeBackend struct {
	*faultServer
	mode     atomic.Pointer[http.HandlerFunc]
	identity atomic.Pointer[http.Header]
}

func newFakeBackend(t *testing.T) *fakeBackend {
	b := &fakeBackend{}
	b.faultServer = newFaultServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*b.mode.Load())(w, r)
	}))
	b.set(b.healthy)
	return b
}

func (b *fakeBackend) set(h http.HandlerFunc) { b.mode.Store(&h) }

func (b *fakeBackend) healthy(w http.ResponseWriter, r *http.Request) {
	id := http.Header{}
	for name, v := range r.Header {
		if strings.HasPrefix(strings.ToLower(name), "x-fhirgate-") {
			id[name] = v
		}
	}
	b.identity.Store(&id)
	w.Header().Set("Content-Type", "application/fhir+json")
	if r.Method == http.MethodPost {
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"resourceType":"Observation","id":"obs-1","status":"final"}`)
		return
	}
	_, _ = io.WriteString(w, `{"resourceType":"Patient","id":"123"}`)
}

// TestFaultBackend breaks the backend in each way and checks Caddy's own
// error answer, the bot path through the same proxy, and recovery.
func TestFaultBackend(t *testing.T) {
	idp := newIdP(t, map[string]string{"alice-token": aliceUserinfo})
	be := newFakeBackend(t)
	s := startStackFrom(t, backendFaultsCaddyfile, faultConfig{stackConfig: stackConfig{IdP: idp.URL, Backend: be.URL()}})
	token := s.token(t, "alpha-app", "alice-token")
	auth := []string{"Authorization", "Bearer " + token}
	read := s.gateway + "/fhir/R4/Patient/123"
	bot := s.gateway + "/fhir/R4/Bot/" + s.botID(t, "alpha", "https://example.com/bots|fhirclient") + "/$execute"

	// A healthy read first: it shows which identity headers (and values)
	// the backend gets, which is what must not leak below.
	if r := do(t, "GET", read, "", "", auth...); r.status != 200 {
		t.Fatalf("healthy read: %d %s", r.status, r.body)
	}
	identity := *be.identity.Load()
	if len(identity) < 4 {
		t.Fatalf("the backend got identity headers %v, want user, profile, project, client, scope", identity)
	}
	secrets := []string{token, "alice-token"}
	for name, values := range identity {
		secrets = append(secrets, strings.ToLower(name))
		secrets = append(secrets, values...)
	}

	tests := []struct {
		name string
		// mode breaks the backend; nil with down set.
		mode func() http.HandlerFunc
		down bool
		// status is what Caddy must answer; alt is the other acceptable
		// Caddy status (504 vs 502 for a timeout is Caddy's choice).
		status, alt int
		minTook     time.Duration
	}{
		{name: "down (connection refused)", down: true, status: 502},
		{name: "reset (TCP RST)", status: 502, mode: func() http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) { resetConn(w) }
		}},
		{name: "hangs up without answering", status: 502, mode: func() http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					_ = conn.Close()
				}
			}
		}},
		{name: "slow (no headers within response_header_timeout)", status: 504, alt: 502, minTook: 500 * time.Millisecond,
			mode: func() http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					select {
					case <-time.After(3 * time.Second):
						be.healthy(w, r)
					case <-r.Context().Done():
					case <-be.stop:
					}
				}
			}},
	}
	t.Logf("identity headers the backend got: %v", identity)
	deadline := time.Now().Add(soakDuration(t, 0, 3*time.Minute))
	for round := 0; round == 0 || time.Now().Before(deadline); round++ {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				if tc.down {
					be.down()
					defer be.up()
				} else {
					be.set(tc.mode())
					defer be.set(be.healthy)
				}

				start := time.Now()
				r := do(t, "GET", read, "", "", auth...)
				took := time.Since(start)
				t.Logf("proxied read: %d in %v, body %q", r.status, took.Round(time.Millisecond), r.body)
				if r.status != tc.status && (tc.alt == 0 || r.status != tc.alt) {
					t.Errorf("status %d, want %d: %s", r.status, tc.status, r.body)
				}
				if took < tc.minTook || took > tc.minTook+5*time.Second {
					t.Errorf("took %v", took)
				}
				checkNoLeak(t, "proxied read error", r, secrets)

				// A bot's FHIR calls go through the same proxy as the caller:
				// its failure is the bot's error, again without the secrets.
				r = do(t, "POST", bot, "application/json", `{"patientId":"123"}`, auth...)
				t.Logf("bot run: %d %s", r.status, r.body)
				if r.status < 400 || !strings.Contains(string(r.body), "OperationOutcome") {
					t.Errorf("bot run against a broken backend: %d %s, want an OperationOutcome error", r.status, r.body)
				}
				checkNoLeak(t, "bot run error", r, secrets)
			})
		}
	}

	t.Run("recovers", func(t *testing.T) {
		if r := do(t, "GET", read, "", "", auth...); r.status != 200 {
			t.Fatalf("read after the backend recovered: %d %s", r.status, r.body)
		}
		if r := do(t, "POST", bot, "application/json", `{"patientId":"123"}`, auth...); r.status != 200 {
			t.Fatalf("bot run after the backend recovered: %d %s", r.status, r.body)
		}
	})

	// Caddy logs each 502/504 with the request's headers: the caller's
	// (Authorization redacted), not the ones fhirgate added for the backend.
	t.Run("error log carries no token or identity header", func(t *testing.T) {
		logs := s.logs()
		for _, secret := range []string{token, "alice-token"} {
			if strings.Contains(logs, secret) {
				t.Fatalf("Caddy's log contains a token")
			}
		}
		var errorLog strings.Builder
		for line := range strings.Lines(logs) {
			if strings.Contains(line, `"logger":"http.log.error"`) {
				errorLog.WriteString(line)
			}
		}
		if errorLog.Len() == 0 {
			t.Fatalf("no http.log.error lines: the proxy errors were not logged as expected:\n%s", logs)
		}
		checkNoLeak(t, "Caddy's error log", response{body: []byte(errorLog.String())}, secrets)
	})
}

// checkNoLeak fails when a response's headers or body contain any of the
// secrets (tokens, identity header names and values), case-insensitively.
func checkNoLeak(t *testing.T, what string, r response, secrets []string) {
	t.Helper()
	var all strings.Builder
	for name, values := range r.header {
		all.WriteString(name + ": " + strings.Join(values, ", ") + "\n")
	}
	all.Write(r.body)
	text := strings.ToLower(all.String())
	for _, s := range secrets {
		if s != "" && strings.Contains(text, strings.ToLower(s)) {
			t.Errorf("%s leaks %q:\n%s", what, s, all.String())
		}
	}
}

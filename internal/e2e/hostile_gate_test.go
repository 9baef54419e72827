package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The hostile-tenant cases of the gate itself (issue 23): public paths
// that accepted writes with the gateway's backend credential, override
// headers and _method that re-route or re-method a request behind the
// gate's back, a bot's path that climbs out of the FHIR base at a decoding
// backend, and async jobs any member could read.

var hostileGateCaddyfile = alphaCaddyfile(aliceAdmin+`			user amy@example.com {
				profile Practitioner/amy
			}
			user ben@example.com {
				profile Practitioner/ben
			}
			bot echo {
				identifier https://example.com/bots|echo
				source {{.Testdata}}/echo.ts
			}
			bot pathprobe {
				identifier https://example.com/bots|pathprobe
				source {{.Testdata}}/pathprobe.ts
			}
`, fhirSite(gatePublicPaths)+`
http://localhost:{{.Gateway2}} {
	fhirgate {
		fhir_base /fhir/R4
`+gatePublicPaths+`		public_upstream_auth
	}
	reverse_proxy {{.Backend}}
}
`)

// gatePublicPaths are the handler lines both of hostileGateCaddyfile's
// sites share.
const gatePublicPaths = `		public_paths /metadata /Questionnaire/*
		upstream_auth bearer gateway-secret
`

type hostileGateConfig struct {
	stackConfig
	Gateway2 int
}

// TestHostileGate runs the gate's hostile-tenant cases against the built
// Caddy and a loopback backend that records every request it gets.
func TestHostileGate(t *testing.T) {
	idp := newIdP(t, map[string]string{
		"alice-token": `{"email":"alice@example.com","email_verified":true}`,
		"amy-token":   `{"email":"amy@example.com","email_verified":true}`,
		"ben-token":   `{"email":"ben@example.com","email_verified":true}`,
	})
	be := newBackend(t)
	cfg := hostileGateConfig{stackConfig: stackConfig{Admin: freePort(t), Gateway: freePort(t), IdP: idp.URL, Backend: be.URL}, Gateway2: freePort(t)}
	cfg.Testdata, _ = filepath.Abs("testdata")
	path := writeCaddyfile(t, t.TempDir(), hostileGateCaddyfile, cfg)
	s := &stack{caddyProc: startCaddy(t, path, cfg.Admin), config: path, gateway: "http://localhost:" + strconv.Itoa(cfg.Gateway)}
	t.Cleanup(loadClient.CloseIdleConnections)
	optIn := "http://localhost:" + strconv.Itoa(cfg.Gateway2)
	alice := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	amy := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "amy-token")}
	ben := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "ben-token")}

	// reaches sends a request and returns what the backend got from it,
	// nil if nothing reached the backend.
	reaches := func(t *testing.T, method, target string, headers ...string) (response, *http.Request) {
		t.Helper()
		before := be.count.Load()
		r := do(t, method, target, "application/fhir+json", "", headers...)
		if be.count.Load() == before {
			return r, nil
		}
		return r, be.last()
	}

	t.Run("public paths are read-only", func(t *testing.T) {
		q := "/fhir/R4/Questionnaire/q1"
		for _, site := range []string{s.gateway, optIn} {
			for _, m := range []string{"PUT", "PATCH", "DELETE", "POST"} {
				r, got := reaches(t, m, site+q)
				if r.status != 401 || !strings.Contains(string(r.body), "OperationOutcome") || got != nil {
					t.Errorf("anonymous %s %s: %d %s, reached the backend: %v", m, site+q, r.status, r.body, got != nil)
				}
			}
		}
		// Anonymous reads reach the backend without any Authorization, also
		// when the caller sent one of its own...
		for _, m := range []string{"GET", "HEAD"} {
			r, got := reaches(t, m, s.gateway+q, "Authorization", "Basic YW5vbjphbm9u")
			if r.status != 200 || got == nil {
				t.Fatalf("anonymous %s: %d %s, reached %v", m, r.status, r.body, got != nil)
			}
			if a := got.Header.Get("Authorization"); a != "" {
				t.Errorf("anonymous %s reached the backend with Authorization %q", m, a)
			}
		}
		// ...and with the gateway's credential where the operator opted in.
		if r, got := reaches(t, "GET", optIn+q); r.status != 200 || got == nil || got.Header.Get("Authorization") != "Bearer gateway-secret" {
			t.Errorf("anonymous GET with public_upstream_auth: %d, reached %v", r.status, got != nil)
		}
		// A write with a token is an ordinary authenticated request.
		r, got := reaches(t, "PUT", s.gateway+q, amy...)
		if r.status != 200 || got == nil || got.Header.Get("Authorization") != "Bearer gateway-secret" || got.Header.Get("X-Fhirgate-Profile") != "Practitioner/amy" {
			t.Errorf("authenticated PUT: %d %s, reached %v", r.status, r.body, got != nil)
		}
	})

	t.Run("override headers never reach the backend", func(t *testing.T) {
		overrides := []string{
			"X-Original-URL", "/fhir/R4/Patient/secret",
			"X-Rewrite-URL", "/fhir/R4/Patient/secret",
			"X-HTTP-Method-Override", "DELETE",
			"X-HTTP-Method", "DELETE",
			"X-Method-Override", "DELETE",
			// Underscore spellings, which CGI-style backends read as the
			// dashed names. (Caddy's proxy did not pass these on even
			// before the gate removed them; the gate's own removal is
			// tested in internal/gateway.)
			"X_Original_URL", "/fhir/R4/Patient/secret",
			"X_HTTP_Method_Override", "DELETE",
		}
		for _, tc := range []struct {
			name, target string
			auth         []string
		}{
			{"authenticated", s.gateway + "/fhir/R4/Patient/1", amy},
			{"public", s.gateway + "/fhir/R4/Questionnaire/q1", nil},
			{"outside the base", s.gateway + "/portal/index.html", nil},
		} {
			r, got := reaches(t, "GET", tc.target, append(append([]string{}, tc.auth...), overrides...)...)
			if r.status != 200 || got == nil {
				t.Fatalf("%s: %d %s", tc.name, r.status, r.body)
			}
			for name, v := range got.Header {
				n := strings.ReplaceAll(strings.ToLower(name), "_", "-")
				switch n {
				case "x-original-url", "x-rewrite-url", "x-http-method-override", "x-http-method", "x-method-override":
					t.Errorf("%s: the backend got %s: %v", tc.name, name, v)
				}
			}
		}
		for _, q := range []string{"_method=DELETE", "%5Fmethod=DELETE", "name=x&_METHOD=PUT"} {
			for _, target := range []string{s.gateway + "/fhir/R4/Patient?" + q, s.gateway + "/fhir/R4/Questionnaire/q1?" + q} {
				r, got := reaches(t, "GET", target, amy...)
				if r.status != 400 || !strings.Contains(string(r.body), "OperationOutcome") || got != nil {
					t.Errorf("%s: %d %s, reached the backend %v", target, r.status, r.body, got != nil)
				}
			}
		}
	})

	t.Run("a bot's path cannot climb out of the base", func(t *testing.T) {
		probe := s.gateway + "/fhir/R4/Bot/" + s.botID(t, "alpha", "https://example.com/bots|pathprobe") + "/$execute"
		bad := []string{
			"Patient/..%2f..%2foutside",
			"Patient/..%2F..%2Foutside",
			"Patient/%2e%2e/%2e%2e/outside",
			"Patient/%252e%252e/%252e%252e/outside",
			"Patient/..%252f..%252foutside",
			"Patient/%25252e%25252e/outside",
			"fhir/R4/Patient/..%5c..%5coutside",
			"Patient/..;/..;/outside",
		}
		before := len(be.requestsSnapshot())
		body := mustJSON(t, map[string]any{"paths": append(bad, "Patient/fine")})
		r := do(t, "POST", probe, "application/json", body, amy...)
		if r.status != 200 {
			t.Fatalf("probe bot: %d %s", r.status, r.body)
		}
		var out struct {
			Results []struct {
				Path, Code, Message string
				OK, OutcomeError    bool
			}
		}
		if err := json.Unmarshal(r.body, &out); err != nil || len(out.Results) != len(bad)+1 {
			t.Fatalf("probe answer: %v %s", err, r.body)
		}
		for _, res := range out.Results[:len(bad)] {
			if res.OK || !res.OutcomeError || res.Code != "invalid" || !strings.Contains(res.Message, "invalid FHIR path") {
				t.Errorf("%s: %+v, want a 400 OperationOutcomeError", res.Path, res)
			}
		}
		// The run went on after the rejections: its last call is served.
		if last := out.Results[len(bad)]; !last.OK {
			t.Errorf("the call after the rejections: %+v", last)
		}
		seen := be.requestsSnapshot()[before:]
		if len(seen) != 1 || seen[0].URL.EscapedPath() != "/fhir/R4/Patient/fine" {
			paths := []string{}
			for _, req := range seen {
				paths = append(paths, req.URL.EscapedPath())
			}
			t.Errorf("the backend saw %q, want only /fhir/R4/Patient/fine", paths)
		}
	})

	t.Run("an async job is its starter's and the admins'", func(t *testing.T) {
		echo := s.gateway + "/fhir/R4/Bot/" + s.botID(t, "alpha", "https://example.com/bots|echo") + "/$execute"
		r := do(t, "POST", echo, "application/json", `{"amy":"private"}`, append(append([]string{}, amy...), "Prefer", "respond-async")...)
		if r.status != 202 {
			t.Fatalf("async run: %d %s", r.status, r.body)
		}
		status := r.header.Get("Content-Location")
		job := pollJob(t, status, amy, "completed")
		if !strings.Contains(mustJSON(t, job["output"]), "private") {
			t.Fatalf("job output %v", job["output"])
		}
		// Amy again from a new sign-in: still hers.
		amyAgain := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "amy-token")}
		pollJob(t, status, amyAgain, "completed")
		pollJob(t, status, alice, "completed")

		// Ben, another member, gets exactly what a job that does not exist
		// gets: the answer does not confirm the job is there.
		u, _ := url.Parse(status)
		jobID := strings.TrimSuffix(strings.TrimPrefix(u.Path, "/fhir/R4/job/"), "/status")
		missing := do(t, "GET", s.gateway+"/fhir/R4/job/x"+jobID+"/status", "", "", ben...)
		got := do(t, "GET", status, "", "", ben...)
		if got.status != 404 || strings.ReplaceAll(string(missing.body), "x"+jobID, jobID) != string(got.body) {
			t.Fatalf("another member's read of the job: %d %s; a missing job's: %d %s", got.status, got.body, missing.status, missing.body)
		}
	})
}

// requestsSnapshot returns the requests the backend has recorded so far.
func (b *backend) requestsSnapshot() []*http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*http.Request(nil), b.requests...)
}

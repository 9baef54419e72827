package e2e

import (
	"encoding/base64"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// machineSecret is the ci client's secret in machineCaddyfile.
const machineSecret = "ci-secret-0123456789abcdef0123456789"

// machineCaddyfile is the stack with a machine client (ci, an admin), Basic
// on the gate and one path that keeps fhirgate tokens.
var machineCaddyfile = alphaCaddyfile(`			client ci {
				secret `+machineSecret+`
				admin
			}
`+aliceAdmin+`			bot echo {
				identifier https://example.com/bots|echo
				source {{.Testdata}}/echo.ts
			}
`, fhirSite(`		basic_auth on
		token_passthrough /verified/*
`))

// TestMedplumCLISignsInByItself: the real @medplum/cli on Node 22 signs in
// with client_credentials (login --auth-type client-credentials, and the
// MEDPLUM_CLIENT_ID/SECRET environment alone), then whoami, get and bot
// deploy work as the ci client; login --auth-type basic works where the
// handler accepts Basic.
func TestMedplumCLISignsInByItself(t *testing.T) {
	needMedplumClient(t)
	s := startStackWith(t, machineCaddyfile, "")
	c := newMedplumCLI(t, s.gateway)
	botID := s.botID(t, "alpha", "https://example.com/bots|echo")
	writeTestFile(t, c.dir, "medplum.config.json", `{"bots":[{"name":"echo","id":"`+botID+`","source":"echo.ts","dist":"echo.js"}]}`)
	writeTestFile(t, c.dir, "echo.ts", "export async function handler(): Promise<string> { return 'deployed-by-cli'; }\n")
	writeTestFile(t, c.dir, "echo.js", "exports.handler = async function () { return 'deployed-by-cli'; };\n")

	// Each sign-in keeps its profile under its own HOME.
	medplum := func(t *testing.T, home string, env []string, args ...string) string {
		t.Helper()
		return c.must(t, append([]string{"HOME=" + home}, env...), args...)
	}
	base := s.gateway + "/"
	wantWhoami := func(t *testing.T, out string) {
		t.Helper()
		if !strings.Contains(out, "Profile: ci (ClientApplication/ci)") || !strings.Contains(out, "Project: alpha (Project/alpha)") {
			t.Fatalf("whoami does not name the ci client and its project:\n%s", out)
		}
	}

	t.Run("login --auth-type client-credentials, then whoami, get, bot deploy", func(t *testing.T) {
		home := t.TempDir()
		medplum(t, home, nil, "login", "--auth-type", "client-credentials", "--base-url", base,
			"--client-id", "ci", "--client-secret", machineSecret)
		wantWhoami(t, medplum(t, home, nil, "whoami"))
		if out := medplum(t, home, nil, "get", "Patient/p1"); !strings.Contains(out, "FromBackend") {
			t.Fatalf("get did not print the backend's Patient:\n%s", out)
		}
		if got := s.backend.last(); got == nil || got.Header.Get("X-Fhirgate-Profile") != "ClientApplication/ci" ||
			got.Header.Get("Authorization") != "" {
			t.Fatalf("the backend saw %v", got.Header)
		}
		out := medplum(t, home, nil, "bot", "deploy", "echo")
		if !strings.Contains(out, "Number of bots deployed: 1") || !strings.Contains(out, "Number of errors: 0") {
			t.Fatalf("bot deploy:\n%s", out)
		}
		// The deployed code runs.
		tok := s.machineToken(t)
		r := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+botID+"/$execute", "application/json", "{}", "Authorization", "Bearer "+tok)
		if r.status != 200 || !strings.Contains(string(r.body), "deployed-by-cli") {
			t.Fatalf("the bot deployed by the CLI answered %d %s", r.status, r.body)
		}
	})

	t.Run("MEDPLUM_CLIENT_ID and MEDPLUM_CLIENT_SECRET alone", func(t *testing.T) {
		env := []string{"MEDPLUM_BASE_URL=" + base, "MEDPLUM_CLIENT_ID=ci", "MEDPLUM_CLIENT_SECRET=" + machineSecret}
		home := t.TempDir()
		wantWhoami(t, medplum(t, home, env, "whoami"))
		if out := medplum(t, home, env, "get", "Patient/p2"); !strings.Contains(out, "FromBackend") {
			t.Fatalf("get did not print the backend's Patient:\n%s", out)
		}
	})

	t.Run("login --auth-type basic where the handler accepts Basic", func(t *testing.T) {
		home := t.TempDir()
		medplum(t, home, nil, "login", "--auth-type", "basic", "--base-url", base, "--client-id", "ci", "--client-secret", machineSecret)
		if out := medplum(t, home, nil, "get", "Patient/p3"); !strings.Contains(out, "FromBackend") {
			t.Fatalf("get with Basic did not print the backend's Patient:\n%s", out)
		}
	})
}

// machineToken signs the ci client in with client_credentials.
func (s *stack) machineToken(t *testing.T) string {
	t.Helper()
	r := do(t, "POST", s.gateway+"/oauth2/token", "application/x-www-form-urlencoded",
		url.Values{"grant_type": {"client_credentials"}}.Encode(),
		"Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("ci:"+machineSecret)))
	if r.status != 200 {
		t.Fatalf("client_credentials: %d %s", r.status, r.body)
	}
	return r.json(t)["access_token"].(string)
}

// TestMedplumClientMachineSignInAndSignOut: @medplum/core 5.x on Node 22,
// startClientLogin and signOut() followed by the refusal of the tokens.
func TestMedplumClientMachineSignInAndSignOut(t *testing.T) {
	needMedplumClient(t)
	s := startStackWith(t, machineCaddyfile, "")
	node, err := filepath.Abs(filepath.Join(medplumDir, "node_modules", "node-22", "bin", "node"))
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, node, "signout.mjs", []string{
		"FHIRGATE_URL=" + s.gateway,
		"CLIENT_ID=alpha-app",
		"IDP_TOKEN=alice-token",
		"MACHINE_CLIENT_ID=ci",
		"MACHINE_CLIENT_SECRET=" + machineSecret,
		"EXPECT_PROJECT=alpha",
	})
}

// TestNoFhirgateTokenLeavesTheGateway: outside fhir_base the recording
// backend never receives a fhirgate token (an application's /auth/callback
// is still proxied, without it), /oauth2/ paths are never proxied, other
// credentials pass, and the token_passthrough path keeps the token.
func TestNoFhirgateTokenLeavesTheGateway(t *testing.T) {
	s := startStackWith(t, machineCaddyfile, "")
	machine := "Bearer " + s.machineToken(t)
	person := "Bearer " + s.token(t, "alpha-app", "alice-token")
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("ci:"+machineSecret))
	foreign := "Bearer eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJodHRwczovL2lkcC5leGFtcGxlIn0.c2ln" // iss https://idp.example

	seen := func(path string) (reached bool, auth string) {
		s.backend.mu.Lock()
		defer s.backend.mu.Unlock()
		for i := len(s.backend.requests) - 1; i >= 0; i-- {
			if r := s.backend.requests[i]; r.URL.Path == path {
				return true, r.Header.Get("Authorization")
			}
		}
		return false, ""
	}
	cases := []struct {
		name, path, auth string
		wantStatus       int
		reach            bool
		wantAuth         string
	}{
		{"app callback with a person's token", "/auth/callback", person, 200, true, ""},
		{"admin path with a machine's token", "/admin/projects/alpha", machine, 200, true, ""},
		{"site root", "/", machine, 200, true, ""},
		{"encoded path", "/static/%61pp.js", person, 200, true, ""},
		{"another issuer's token passes", "/other", foreign, 200, true, foreign},
		{"opt-in path keeps the token", "/verified/report", machine, 200, true, machine},
		{"opt-in prefix is not a sibling", "/verifiedx", machine, 200, true, ""},
		{"unknown /oauth2 path", "/oauth2/authorize", person, 404, false, ""},
		{"/oauth2 with a trailing segment", "/oauth2/token/x", machine, 404, false, ""},
		{"/oauth2 in another case", "/OAuth2/Logout", machine, 404, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, "GET", s.gateway+tc.path, "", "", "Authorization", tc.auth)
			if r.status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", r.status, tc.wantStatus, r.body)
			}
			u, _ := url.Parse(s.gateway + tc.path)
			reached, auth := seen(u.Path)
			if reached != tc.reach || auth != tc.wantAuth {
				t.Fatalf("backend reached %v with Authorization %q; want %v with %q", reached, auth, tc.reach, tc.wantAuth)
			}
			if tc.wantStatus == 404 && !strings.Contains(string(r.body), "OperationOutcome") {
				t.Fatalf("the 404 is not fhirgate's JSON: %s", r.body)
			}
		})
	}
	// Under fhir_base, Basic is the client's credentials here; without a
	// valid secret it is refused like a bad token.
	if r := do(t, "GET", s.gateway+"/fhir/R4/Patient/b1", "", "", "Authorization", basic); r.status != 200 {
		t.Fatalf("Basic under fhir_base: %d %s", r.status, r.body)
	}
	bad := "Basic " + base64.StdEncoding.EncodeToString([]byte("ci:wrong"))
	if r := do(t, "GET", s.gateway+"/fhir/R4/Patient/b2", "", "", "Authorization", bad); r.status != 401 {
		t.Fatalf("a wrong Basic secret: %d %s", r.status, r.body)
	}
	// Sign-out through the gateway, then the token is refused.
	if r := do(t, "POST", s.gateway+"/oauth2/logout", "application/json", "{}", "Authorization", person); r.status != 200 ||
		!strings.Contains(string(r.body), "All OK") {
		t.Fatalf("logout: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", s.gateway+"/fhir/R4/Patient/b3", "", "", "Authorization", person); r.status != 401 {
		t.Fatalf("the token after logout: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", s.gateway+"/oauth2/userinfo", "", "", "Authorization", machine); r.status != 200 ||
		r.json(t)["sub"] != "ci" || r.json(t)["fhirUser"] != "ClientApplication/ci" {
		t.Fatalf("userinfo: %d %s", r.status, r.body)
	}
}

// TestBasicIsRefusedWhereItIsOff: the standard stack's handler leaves
// basic_auth off, so a client's correct Basic credentials get 401.
func TestBasicIsRefusedWhereItIsOff(t *testing.T) {
	s := startStackWith(t, strings.Replace(machineCaddyfile, "basic_auth on", "basic_auth off", 1), "")
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("ci:"+machineSecret))
	r := do(t, "GET", s.gateway+"/fhir/R4/Patient/b1", "", "", "Authorization", basic)
	if r.status != 401 || s.backend.count.Load() != 0 {
		t.Fatalf("Basic where it is off: %d %s (backend requests %d)", r.status, r.body, s.backend.count.Load())
	}
	// The same client still signs in with client_credentials.
	s.machineToken(t)
}

func writeTestFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

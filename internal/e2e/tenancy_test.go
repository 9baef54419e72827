package e2e

import (
	"strings"
	"testing"
	"time"
)

// startTenantStack is the standard stack with the handler's backend_tenant
// set: project alpha (alice) and project beta (bob) share one recording
// backend.
func startTenantStack(t *testing.T, mode string) *stack {
	t.Helper()
	tmpl := strings.Replace(stackCaddyfile, "\t\tmax_body 64KB\n", "\t\tmax_body 64KB\n\t\tbackend_tenant "+mode+"\n", 1)
	if tmpl == stackCaddyfile {
		t.Fatal("the stack Caddyfile changed: backend_tenant not inserted")
	}
	return startStackWith(t, tmpl, "")
}

// pathsSince returns the escaped paths the backend saw from index from on.
func (b *backend) pathsSince(from int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, r := range b.requests[from:] {
		out = append(out, r.URL.EscapedPath())
	}
	return out
}

func (b *backend) seen() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.requests)
}

// TestBackendTenantPathKeepsEachProjectInItsPartition: with backend_tenant
// path, each project's members (and its bots) reach only their project's
// partition of the shared backend, whatever path they send.
func TestBackendTenantPathKeepsEachProjectInItsPartition(t *testing.T) {
	s := startTenantStack(t, "path")
	alice := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	bob := []string{"Authorization", "Bearer " + s.token(t, "beta-app", "bob-token")}
	base := s.gateway + "/fhir/R4"

	for _, c := range []struct {
		who  string
		auth []string
		want string
	}{{"alice", alice, "/fhir/R4/alpha/Patient/1"}, {"bob", bob, "/fhir/R4/beta/Patient/1"}} {
		n := s.backend.seen()
		r := do(t, "GET", base+"/Patient/1", "", "", c.auth...)
		if r.status != 200 {
			t.Fatalf("%s reads Patient/1: %d %s", c.who, r.status, r.body)
		}
		if got := s.backend.pathsSince(n); len(got) != 1 || got[0] != c.want {
			t.Fatalf("%s's read reached %v, want %s", c.who, got, c.want)
		}
	}

	// Bob goes after alpha's partition every way a path can be bent. Each
	// either stays in beta's partition or never reaches the backend.
	n := s.backend.seen()
	refused := 0
	for _, p := range []string{
		"/fhir/R4/alpha/Patient/1",
		"/fhir/R4/../R4/alpha/Patient/1",
		"/fhir/R4/%2e%2e/R4/alpha/Patient/1",
		"/fhir/R4/Patient/..%2F..%2Falpha%2FPatient%2F1",
		"/fhir/R4/Patient/..%252F..%252Falpha",
		"/fhir/R4/..;/alpha/Patient/1",
		"/fhir/R4/Patient%5C..%5C..%5Calpha",
		"/fhir/R4//alpha//Patient//1",
		"/fhir/R4;x/alpha/Patient/1",
		"/FHIR/r4/alpha/Patient/1",
	} {
		r := sendRaw(s.gateway, rawRequest{method: "GET", target: p, headers: []string{bob[0] + ": " + bob[1]}}, 10*time.Second)
		if r.err != nil {
			t.Fatalf("%s: %v", p, r.err)
		}
		if r.status >= 400 {
			refused++
		}
	}
	// The absolute form of a request target, naming another host.
	abs := sendRaw(s.gateway, rawRequest{method: "GET", target: "http://elsewhere.test/fhir/R4/alpha/Patient/1",
		headers: []string{bob[0] + ": " + bob[1]}}, 10*time.Second)
	if abs.err != nil {
		t.Fatal(abs.err)
	}
	for _, got := range s.backend.pathsSince(n) {
		if got != "/fhir/R4/beta" && !strings.HasPrefix(got, "/fhir/R4/beta/") {
			t.Fatalf("bob reached %q, outside beta's partition", got)
		}
	}
	if refused == 0 {
		t.Fatal("no hostile path was refused: the escapes were not exercised")
	}

	// Alice's bot reads and writes through the medplum client: alpha's
	// partition too.
	echo := s.botID(t, "alpha", "https://example.com/bots|fhirclient")
	n = s.backend.seen()
	r := do(t, "POST", base+"/Bot/"+echo+"/$execute", "application/json", `{"patientId":"p1"}`, alice...)
	if r.status != 200 {
		t.Fatalf("alice runs fhirclient: %d %s", r.status, r.body)
	}
	got := s.backend.pathsSince(n)
	if len(got) != 2 || got[0] != "/fhir/R4/alpha/Patient/p1" || got[1] != "/fhir/R4/alpha/Observation" {
		t.Fatalf("the bot's calls reached %v", got)
	}
}

// TestBackendTenantHeaderSendsTheCallersProject: with backend_tenant
// header, the backend learns the project from the configured header, and
// a client's own copy of it never gets through.
func TestBackendTenantHeaderSendsTheCallersProject(t *testing.T) {
	s := startTenantStack(t, "header X-Tenant-Id")
	bob := []string{"Authorization", "Bearer " + s.token(t, "beta-app", "bob-token")}
	r := do(t, "GET", s.gateway+"/fhir/R4/Patient/1", "", "", append(bob, "X-Tenant-Id", "alpha")...)
	if r.status != 200 {
		t.Fatalf("bob reads: %d %s", r.status, r.body)
	}
	last := s.backend.last()
	if got := last.Header.Values("X-Tenant-Id"); len(got) != 1 || got[0] != "beta" {
		t.Fatalf("X-Tenant-Id at the backend: %q, want [beta]", got)
	}
	if last.URL.Path != "/fhir/R4/Patient/1" {
		t.Fatalf("path %q changed in header mode", last.URL.Path)
	}
	// Without a token (a public path) the header is removed, not passed on.
	if r := do(t, "GET", s.gateway+"/fhir/R4/metadata", "", "", "X-Tenant-Id", "alpha"); r.status != 200 {
		t.Fatalf("metadata: %d", r.status)
	}
	if got := s.backend.last().Header.Values("X-Tenant-Id"); len(got) != 0 {
		t.Fatalf("an anonymous request carried X-Tenant-Id %q to the backend", got)
	}
}

// TestClientScopeFromTheCLI: a client created with `caddy fhirgate client
// create --scope` grants at most that scope, and the discovery document is
// served by the gateway.
func TestClientScopeFromTheCLI(t *testing.T) {
	s := startStack(t, "")
	if out, err := s.cli("fhirgate", "client", "create", "--address", s.adminAddr, "--project", "beta", "--id", "narrow",
		"--userinfo-url", s.idp.URL+"/userinfo", "--scope", "openid offline_access user/Patient.rs"); err != nil {
		t.Fatalf("cli client create: %v\n%s", err, out)
	}
	form := "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange&client_id=narrow&subject_token=bob-token" +
		"&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token"
	r := do(t, "POST", s.gateway+"/oauth2/token", "application/x-www-form-urlencoded", form+"&scope=user%2F*.cruds")
	if r.status != 200 || r.json(t)["scope"] != "user/Patient.rs" {
		t.Fatalf("exchange asking for user/*.cruds: %d %s", r.status, r.body)
	}
	r = do(t, "POST", s.gateway+"/oauth2/token", "application/x-www-form-urlencoded", form+"&scope=user%2FObservation.r")
	if r.status != 400 || r.json(t)["error"] != "invalid_scope" {
		t.Fatalf("exchange asking for what the client does not allow: %d %s", r.status, r.body)
	}
	n := s.backend.seen()
	r = do(t, "GET", s.gateway+"/fhir/R4/.well-known/smart-configuration", "", "")
	if r.status != 200 || r.json(t)["token_endpoint"] != s.gateway+"/oauth2/token" || s.backend.seen() != n {
		t.Fatalf("smart-configuration: %d %s (backend reached: %v)", r.status, r.body, s.backend.seen() != n)
	}
}

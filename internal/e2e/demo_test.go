package e2e

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// demo runs Caddyfile.example exactly as the README does, on free ports.
type demo struct {
	*caddyProc
	gateway, idp string
	config       string
}

func startDemo(t *testing.T) *demo {
	t.Helper()
	admin, gw, idp, backend := freePort(t), freePort(t), freePort(t), freePort(t)
	config := filepath.Join(repoRoot, "Caddyfile.example")
	p := startCaddy(t, config, admin,
		"ADMIN_PORT="+strconv.Itoa(admin), "GATEWAY_PORT="+strconv.Itoa(gw),
		"IDP_PORT="+strconv.Itoa(idp), "BACKEND_PORT="+strconv.Itoa(backend))
	return &demo{
		caddyProc: p,
		gateway:   "http://localhost:" + strconv.Itoa(gw),
		idp:       "http://localhost:" + strconv.Itoa(idp),
		config:    config,
	}
}

// exchange trades the demo identity provider's token for a fhirgate token.
func (d *demo) exchange(t *testing.T) map[string]any {
	t.Helper()
	form := url.Values{
		"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"client_id":          {"demo-app"},
		"subject_token":      {"demo-token-alice"},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}
	r := do(t, "POST", d.gateway+"/oauth2/token", "application/x-www-form-urlencoded", form.Encode())
	if r.status != 200 {
		t.Fatalf("token exchange: %d %s", r.status, r.body)
	}
	return r.json(t)
}

// TestDemoWalkthrough follows the README: admin API, token exchange, a
// proxied read, the CLI, a reload, and backup/restore, checking nothing is
// lost along the way.
func TestDemoWalkthrough(t *testing.T) {
	d := startDemo(t)
	admin := "http://" + d.adminAddr

	// The declared project, client, user and bot exist.
	if r := do(t, "GET", admin+"/fhirgate/Project/demo", "", ""); r.status != 200 || r.json(t)["name"] != "Demo clinic" {
		t.Fatalf("declared project: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", admin+"/fhirgate/User?email=alice@example.com", "", ""); r.status != 200 || !strings.Contains(string(r.body), "alice@example.com") {
		t.Fatalf("declared user: %d %s", r.status, r.body)
	}

	// No token: 401 with the RFC 6750 challenge, backend untouched.
	r := do(t, "GET", d.gateway+"/fhir/R4/Patient/123", "", "")
	if r.status != 401 || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), `Bearer realm="fhirgate"`) {
		t.Fatalf("unauthenticated read: %d %v %s", r.status, r.header, r.body)
	}
	// The public capability statement needs no token.
	if r := do(t, "GET", d.gateway+"/fhir/R4/metadata", "", ""); r.status != 200 {
		t.Fatalf("metadata: %d %s", r.status, r.body)
	}

	tok := d.exchange(t)
	access := tok["access_token"].(string)
	if tok["issued_token_type"] != "urn:ietf:params:oauth:token-type:access_token" || tok["refresh_token"] == nil {
		t.Fatalf("token response: %v", tok)
	}
	r = do(t, "GET", d.gateway+"/fhir/R4/Patient/123", "", "", "Authorization", "Bearer "+access)
	if r.status != 200 || !strings.Contains(string(r.body), `"id":"123"`) || !strings.Contains(string(r.body), "Practitioner/alice") {
		t.Fatalf("proxied read: %d %s", r.status, r.body)
	}

	// Metrics are on Caddy's admin endpoint, labelled by known client and
	// by refusal reason.
	m := do(t, "GET", admin+"/metrics", "", "")
	for _, want := range []string{
		`caddy_fhirgate_token_requests_total{client_id="demo-app",grant_type="urn:ietf:params:oauth:grant-type:token-exchange",outcome="ok"} 1`,
		`caddy_fhirgate_auth_failures_total{reason="missing"} 1`,
		`caddy_fhirgate_userinfo_duration_seconds_count{outcome="ok"} 1`,
	} {
		if !strings.Contains(string(m.body), want) {
			t.Fatalf("metrics lack %s", want)
		}
	}

	// The CLI manages records through the admin API.
	if out, err := d.cli("fhirgate", "user", "create", "--address", d.adminAddr, "--email", "bob@example.com"); err != nil {
		t.Fatalf("cli user create: %v\n%s", err, out)
	}
	if out, err := d.cli("fhirgate", "membership", "create", "--address", d.adminAddr,
		"--project", "demo", "--email", "bob@example.com", "--profile", "Practitioner/bob"); err != nil {
		t.Fatalf("cli membership create: %v\n%s", err, out)
	}
	out, err := d.cli("fhirgate", "membership", "list", "--address", d.adminAddr, "--project", "demo")
	if err != nil || !strings.Contains(out, "Practitioner/bob") || !strings.Contains(out, "Practitioner/alice") {
		t.Fatalf("cli membership list: %v\n%s", err, out)
	}

	// Validating the live config meets the store's lock, and says so.
	out, err = d.cli("validate", "--config", d.config)
	if err == nil || !strings.Contains(out, "is locked by another fhirgate/caddy process") {
		t.Fatalf("caddy validate against the running store: %v\n%s", err, out)
	}

	// A reload keeps the store, the records made at run time, and the
	// tokens issued before it.
	if out, err := d.cli("reload", "--config", d.config, "--address", d.adminAddr, "--force"); err != nil {
		t.Fatalf("caddy reload: %v\n%s", err, out)
	}
	if strings.Contains(d.logs(), "locked") {
		t.Fatalf("reload met the store lock:\n%s", d.logs())
	}
	if r := do(t, "GET", admin+"/fhirgate/User?email=bob@example.com", "", ""); !strings.Contains(string(r.body), "bob@example.com") {
		t.Fatalf("user lost across reload: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", d.gateway+"/fhir/R4/Patient/7", "", "", "Authorization", "Bearer "+access); r.status != 200 {
		t.Fatalf("token issued before the reload: %d %s", r.status, r.body)
	}

	// Backup, delete, restore.
	backup := filepath.Join(d.dir, "store.backup")
	if out, err := d.cli("fhirgate", "backup", "--address", d.adminAddr, backup); err != nil {
		t.Fatalf("cli backup: %v\n%s", err, out)
	}
	if fi, err := os.Stat(backup); err != nil || fi.Size() == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v %v", fi, err)
	}
	ms := do(t, "GET", admin+"/fhirgate/ProjectMembership?project=demo", "", "")
	var bobMembership string
	for _, e := range ms.json(t)["entry"].([]any) {
		res := e.(map[string]any)["resource"].(map[string]any)
		if strings.Contains(res["profile"].(map[string]any)["reference"].(string), "bob") {
			bobMembership = res["id"].(string)
		}
	}
	if r := do(t, "DELETE", admin+"/fhirgate/ProjectMembership/"+bobMembership, "", ""); r.status != 200 {
		t.Fatalf("delete membership: %d %s", r.status, r.body)
	}
	if out, err := d.cli("fhirgate", "restore", "--address", d.adminAddr, backup); err != nil {
		t.Fatalf("cli restore: %v\n%s", err, out)
	}
	if r := do(t, "GET", admin+"/fhirgate/ProjectMembership/"+bobMembership, "", ""); r.status != 200 {
		t.Fatalf("membership not restored: %d %s", r.status, r.body)
	}
}

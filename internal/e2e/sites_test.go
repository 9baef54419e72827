package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTwoSitesShareOneApp runs two gateway sites (different FHIR bases, one
// passing the caller's token through) over one fhirgate app: a token from
// either site works on both, because they share the store and keys.
func TestTwoSitesShareOneApp(t *testing.T) {
	idp := newIdP(t, map[string]string{"alice-token": `{"email":"alice@example.com","email_verified":true}`})
	be := newBackend(t)
	admin, siteA, siteB := freePort(t), freePort(t), freePort(t)
	config := fmt.Sprintf(`{
	admin localhost:%d
	fhirgate {
		storage_dir ./data
		issuer http://gateway.test
		project p {
			client web {
				userinfo_url %s/userinfo
			}
			user alice@example.com {
				profile Practitioner/alice
			}
		}
	}
}
http://localhost:%d {
	fhirgate
	reverse_proxy %s
}
http://localhost:%d {
	fhirgate {
		fhir_base /api/fhir
		upstream_auth passthrough
	}
	reverse_proxy %s
}
`, admin, idp.URL, siteA, be.URL, siteB, be.URL)
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startCaddy(t, path, admin)
	s := &stack{caddyProc: p, config: path, gateway: fmt.Sprintf("http://localhost:%d", siteA), idp: idp, backend: be}
	tokA := s.token(t, "web", "alice-token")
	s.gateway = fmt.Sprintf("http://localhost:%d", siteB)
	tokB := s.token(t, "web", "alice-token")

	for _, tc := range []struct{ url, token, wantAuth string }{
		{fmt.Sprintf("http://localhost:%d/fhir/R4/Patient/1", siteA), tokB, ""},
		{fmt.Sprintf("http://localhost:%d/api/fhir/Patient/1", siteB), tokA, "Bearer " + tokA},
	} {
		r := do(t, "GET", tc.url, "", "", "Authorization", "Bearer "+tc.token)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", tc.url, r.status, r.body)
		}
		if got := be.last(); got.Header.Get("Authorization") != tc.wantAuth || got.Header.Get("X-Fhirgate-Project") != "p" {
			t.Fatalf("%s: backend headers %v", tc.url, got.Header)
		}
	}
	// Site B's base is /api/fhir: /fhir/R4 there is not gated (and goes to
	// the backend as is), while /api/fhir is.
	if r := do(t, "GET", fmt.Sprintf("http://localhost:%d/api/fhir/Patient/1", siteB), "", ""); r.status != 401 {
		t.Fatalf("site B without a token: %d", r.status)
	}
}

// TestAuditEventsExpire runs a bot with a short audit retention and checks
// its AuditEvent is listed, then trimmed once the retention has passed.
func TestAuditEventsExpire(t *testing.T) {
	s := startStack(t, "audit_retention 2s")
	auth := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	echo := s.botID(t, "alpha", "https://example.com/bots|echo")
	if r := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+echo+"/$execute", "text/plain", "audit me", auth...); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	list := func() string {
		return string(do(t, "GET", "http://"+s.adminAddr+"/fhirgate/AuditEvent?bot="+echo, "", "").body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(list(), `"Bot/`+echo+`"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no audit event: %s", list())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for strings.Contains(list(), `"Bot/`+echo+`"`) {
		if time.Now().After(deadline) {
			t.Fatalf("audit event kept past its retention: %s", list())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

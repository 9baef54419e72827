package e2e

import (
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// TestBadgerBackupRestoredIntoPostgres is the migration docs/replicas.md
// describes, with the built Caddy: a gateway on Badger issues tokens and
// is backed up with `caddy fhirgate backup`; a gateway on PostgreSQL at the
// same address (so the same issuer) loads the backup with `caddy fhirgate
// restore`, and the tokens issued before the move verify and refresh on
// it.
func TestBadgerBackupRestoredIntoPostgres(t *testing.T) {
	dsn := pgkvtest.DSN(t)
	old := startStack(t, "")
	form := url.Values{
		"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"client_id":          {"alpha-app"},
		"subject_token":      {"alice-token"},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}
	r := do(t, "POST", old.gateway+"/oauth2/token", "application/x-www-form-urlencoded", form.Encode())
	if r.status != 200 {
		t.Fatalf("exchange on Badger: %d %s", r.status, r.body)
	}
	tok := r.json(t)
	access, refresh := tok["access_token"].(string), tok["refresh_token"].(string)
	backup := filepath.Join(t.TempDir(), "fhirgate.backup")
	if out, err := old.cli("fhirgate", "backup", "--address", old.adminAddr, backup); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	old.stop()

	// The same gateway on PostgreSQL: same site address, same issuer.
	gateway, _ := strconv.Atoi(old.gateway[strings.LastIndex(old.gateway, ":")+1:])
	cfg := stackConfig{Admin: freePort(t), Gateway: gateway, IdP: old.idp.URL, Backend: old.backend.URL}
	cfg.Testdata, _ = filepath.Abs("testdata")
	tmpl := strings.Replace(stackCaddyfile, "storage_dir ./data", "storage postgres {\n\t\t\tdsn {env.FHIRGATE_POSTGRES_DSN}\n\t\t}", 1)
	pg := startCaddy(t, writeCaddyfile(t, t.TempDir(), tmpl, cfg), cfg.Admin, "FHIRGATE_POSTGRES_DSN="+dsn)
	if r := do(t, "GET", old.gateway+"/fhir/R4/Patient/1", "", "", "Authorization", "Bearer "+access); r.status != 401 {
		t.Fatalf("a Badger token on the empty PostgreSQL gateway: %d, want 401", r.status)
	}
	if out, err := pg.cli("fhirgate", "restore", "--address", pg.adminAddr, backup); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if r := do(t, "GET", old.gateway+"/fhir/R4/Patient/1", "", "", "Authorization", "Bearer "+access); r.status != 200 {
		t.Fatalf("the access token issued on Badger, after the move: %d %s", r.status, r.body)
	}
	r = do(t, "POST", old.gateway+"/oauth2/token", "application/x-www-form-urlencoded",
		url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {"alpha-app"}}.Encode())
	if r.status != 200 {
		t.Fatalf("the refresh token issued on Badger, after the move: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", old.gateway+"/fhir/R4/Patient/2", "", "", "Authorization", "Bearer "+r.json(t)["access_token"].(string)); r.status != 200 {
		t.Fatalf("the refreshed token: %d %s", r.status, r.body)
	}
	if !strings.Contains(pg.logs(), "store restored from backup") {
		t.Fatal("the PostgreSQL gateway did not log the restore")
	}
	if strings.Contains(pg.logs(), dsn) {
		t.Fatal("the DSN appears in the log")
	}
}

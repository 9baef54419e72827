package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
	"github.com/fhirgate/fhirgate/internal/tokens"
)

// loadStorageApp provisions and starts an App on the storage given as JSON,
// cleaned up with the test.
func loadStorageApp(t *testing.T, storage string, projects map[string]*ProjectConfig) (*App, error) {
	t.Helper()
	return loadAppConfig(t, &App{StorageRaw: json.RawMessage(storage), BotIsolation: isolationInProcess, Projects: projects}, true)
}

// TestPostgresStorageFromAPlaceholder: `storage postgres` with its DSN in
// an environment variable keeps the declared records in PostgreSQL; a
// second config on the same DSN (a reload) shares the open store, and the
// store writes and loads backups.
func TestPostgresStorageFromAPlaceholder(t *testing.T) {
	t.Setenv("FHIRGATE_TEST_STORAGE_DSN", pgkvtest.DSN(t))
	cfg := `{"module": "postgres", "dsn": "{env.FHIRGATE_TEST_STORAGE_DSN}", "max_conns": 4, "timeout": 5000000000}`
	projects := map[string]*ProjectConfig{"p": {Users: map[string]*UserConfig{"ann@example.com": {Profile: "Practitioner/ann"}}}}
	a, err := loadStorageApp(t, cfg, projects)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.Store().UserByEmail(ctx, "ann@example.com"); err != nil {
		t.Fatalf("the declared user: %v", err)
	}
	if _, ok := a.storage.(*PostgresStorage); !ok {
		t.Fatalf("storage is %T", a.storage)
	}
	b, err := loadStorageApp(t, cfg, projects)
	if err != nil {
		t.Fatal(err)
	}
	if a.store != b.store {
		t.Error("a second config on the same DSN opened a second store")
	}
	db, ok := a.store.kv.(backupKV)
	if !ok {
		t.Fatalf("%T cannot back up", a.store.kv)
	}
	var buf bytes.Buffer
	if err := db.Backup(&buf); err != nil || !strings.Contains(buf.String(), "ann@example.com") {
		t.Fatalf("backup: %d bytes, %v", buf.Len(), err)
	}
}

// TestStorageErrorsHideTheDSN: a PostgreSQL that cannot be reached fails
// the load, and neither the error nor the pool key shows the password.
func TestStorageErrorsHideTheDSN(t *testing.T) {
	const secret = "pw-c8x2m4"
	t.Setenv("FHIRGATE_TEST_STORAGE_DSN", "postgres://u:"+secret+"@127.0.0.1:1/db?connect_timeout=2")
	_, err := loadStorageApp(t, `{"module": "postgres", "dsn": "{env.FHIRGATE_TEST_STORAGE_DSN}"}`, nil)
	if err == nil {
		t.Fatal("a load on an unreachable PostgreSQL succeeded")
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("the error shows the password: %v", err)
	}
	s := &PostgresStorage{DSN: "{env.FHIRGATE_TEST_STORAGE_DSN}"}
	if err := s.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.storageKey(), secret) || !strings.HasPrefix(s.storageKey(), "postgres ") {
		t.Fatalf("storage key %q", s.storageKey())
	}
	other := &PostgresStorage{DSN: "postgres://u:other@127.0.0.1:1/db"}
	_ = other.Provision(caddy.Context{})
	if other.storageKey() == s.storageKey() {
		t.Fatal("two DSNs share a storage key")
	}
}

// TestStorageConfigErrors: the load refuses what the Caddyfile parser
// cannot see.
func TestStorageConfigErrors(t *testing.T) {
	t.Setenv("FHIRGATE_TEST_EMPTY", "")
	tests := []struct {
		name, app, want string
	}{
		{"no dsn", `{"storage": {"module": "postgres"}}`, "dsn is required"},
		{"placeholder unset", `{"storage": {"module": "postgres", "dsn": "{env.FHIRGATE_TEST_EMPTY}"}}`, "dsn is empty once its placeholders are replaced"},
		{"negative max_conns", `{"storage": {"module": "postgres", "dsn": "host=x", "max_conns": -1}}`, "invalid max_conns -1"},
		{"unknown module", `{"storage": {"module": "redis"}}`, "fhirgate.storage.redis"},
		{"storage and storage_dir", `{"storage": {"module": "badger"}, "storage_dir": "/tmp/x"}`, "storage and storage_dir both set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a App
			if err := json.Unmarshal([]byte(tt.app), &a); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			_, err := a.loadStorage(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestStorageDirIsShortForBadger: storage_dir, `storage badger { dir }` and
// a relative spelling of the same directory share one pool key.
func TestStorageDirIsShortForBadger(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	var keys []string
	for _, app := range []App{
		{StorageDir: dir},
		{StorageRaw: json.RawMessage(`{"module": "badger", "dir": "` + dir + `"}`)},
		{StorageRaw: json.RawMessage(`{"module": "badger", "dir": "."}`)},
	} {
		s, err := app.loadStorage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, s.storageKey())
	}
	if keys[0] != keys[1] || keys[1] != keys[2] {
		t.Fatalf("keys %q", keys)
	}
}

// TestRestoringABadgerBackupIntoPostgresKeepsTokensValid: a backup of a
// Badger gateway, loaded through the admin API into a running gateway on
// PostgreSQL, brings the signing keys: a token the Badger gateway issued
// verifies on the PostgreSQL one at once.
func TestRestoringABadgerBackupIntoPostgresKeepsTokensValid(t *testing.T) {
	old, err := loadStorageApp(t, `{"module": "badger", "dir": "`+t.TempDir()+`"}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := old.tokens.IssueAccess(tokens.AccessClaims{Sub: "u", LoginID: "l"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	if err := old.store.kv.(backupKV).Backup(&backup); err != nil {
		t.Fatal(err)
	}

	t.Setenv("FHIRGATE_TEST_STORAGE_DSN", pgkvtest.DSN(t))
	pg, err := loadStorageApp(t, `{"module": "postgres", "dsn": "{env.FHIRGATE_TEST_STORAGE_DSN}"}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := pg.tokens.Verify(ctx, tok, tokens.KindAccess); err == nil {
		t.Fatal("the PostgreSQL gateway verified a token of another keyring before the restore")
	}
	req := httptest.NewRequest(http.MethodPost, "/fhirgate/restore", &backup)
	req.Header.Set("Content-Type", "application/octet-stream")
	rec := httptest.NewRecorder()
	pg.adminHandler(zap.NewNop()).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("restore: %d %s", rec.Code, rec.Body)
	}
	if c, err := pg.tokens.Verify(ctx, tok, tokens.KindAccess); err != nil || c.LoginID != "l" {
		t.Fatalf("the Badger gateway's token after the restore: %+v, %v", c, err)
	}
}

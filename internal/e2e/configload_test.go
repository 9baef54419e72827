package e2e

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
)

// The config-load suite: a load is all or nothing. A reload refused for a
// bot that does not compile leaves every record and version as it was, and
// the old config serving; `caddy validate` writes nothing to a store no
// running Caddy holds.

// configLoadCaddyfile declares a project with a client, a user and bots
// whose sources live in {{.Testdata}}; {{.Extra}} adds declarations inside
// the project.
const configLoadCaddyfile = `{
	admin localhost:{{.Admin}}
	skip_install_trust
	fhirgate {
		storage_dir {{.Storage}}
		issuer http://localhost:{{.Gateway}}
		bot_isolation inprocess
		project alpha {
			client alpha-app {
				userinfo_url {{.IdP}}/userinfo
			}
			user alice@example.com {
				profile Practitioner/alice
				external_id sub-alice
			}
			bot echo {
				identifier https://example.com/bots|echo
				source {{.Testdata}}/echo.ts
			}
			{{.Extra}}
		}
	}
}

http://localhost:{{.Gateway}} {
	fhirgate
	reverse_proxy {{.Backend}}
}
`

// configLoadTypes are the types a config load writes that the admin API lists.
var configLoadTypes = []string{"Project", "ClientApplication", "User", "ProjectMembership", "Bot", "Binary"}

// adminVersions returns every record of the load's types as
// "Type/id" → meta.versionId, read through the admin API.
func (s *stack) adminVersions(t *testing.T) map[string]string {
	t.Helper()
	versions := map[string]string{}
	for _, typ := range configLoadTypes {
		r := do(t, "GET", "http://"+s.adminAddr+"/fhirgate/"+typ, "", "")
		if r.status != 200 {
			t.Fatalf("listing %s: %d %s", typ, r.status, r.body)
		}
		var b struct {
			Entry []struct {
				Resource struct {
					ID   string `json:"id"`
					Meta struct {
						VersionID string `json:"versionId"`
					} `json:"meta"`
				} `json:"resource"`
			} `json:"entry"`
		}
		if err := json.Unmarshal(r.body, &b); err != nil {
			t.Fatalf("listing %s: %v", typ, err)
		}
		for _, e := range b.Entry {
			versions[typ+"/"+e.Resource.ID] = e.Resource.Meta.VersionID
		}
	}
	return versions
}

// copyBots puts echo.ts and a bot that does not compile in a new directory.
func copyBots(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	echo, err := os.ReadFile(filepath.Join("testdata", "echo.ts"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"echo.ts":   string(echo),
		"shout.ts":  "export async function handler(m: unknown, e: { input: string }) { return String(e.input).toUpperCase(); }\n",
		"broken.ts": "export async function handler(m: unknown, e: { input: unknown } {\n",
	}
	for name, code := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(code), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestConfigLoadRejectedReloadChangesNothing(t *testing.T) {
	idp := newIdP(t, map[string]string{
		"alice-token": `{"sub":"sub-alice","email":"alice@example.com","email_verified":true}`,
	})
	be := newBackend(t)
	cfg := faultConfig{stackConfig: stackConfig{IdP: idp.URL, Backend: be.URL, Testdata: copyBots(t)}}
	cfg.Storage = filepath.Join(t.TempDir(), "data")
	s := startStackFrom(t, configLoadCaddyfile, cfg)
	alice := s.token(t, "alpha-app", "alice-token")
	runEcho := func() response {
		return do(t, "POST", s.gateway+"/fhir/R4/Bot/$execute?identifier="+url.QueryEscape("https://example.com/bots|echo"),
			"text/plain", "hello", "Authorization", "Bearer "+alice)
	}
	if r := runEcho(); r.status != 200 || string(r.body) != "hello" {
		t.Fatalf("echo before the reload: %d %s", r.status, r.body)
	}
	before := s.adminVersions(t)
	if len(before) < 6 {
		t.Fatalf("the first load stored only %v", before)
	}

	// The new config changes the user, gives echo new code, adds a user
	// and a valid bot, and a bot with a syntax error.
	cfg.Admin, cfg.Gateway = portOf(t, s.adminAddr), portOf(t, s.gateway)
	cfg.Extra = `user carol@example.com {
				profile Practitioner/carol
			}
			bot valid {
				source ` + cfg.Testdata + `/shout.ts
			}
			bot broken {
				source ` + cfg.Testdata + `/broken.ts
			}`
	next := strings.Replace(configLoadCaddyfile, "external_id sub-alice", "external_id sub-alice\n\t\t\t\tadmin", 1)
	next = strings.Replace(next, "{{.Testdata}}/echo.ts", "{{.Testdata}}/shout.ts", 1)
	path := writeCaddyfile(t, t.TempDir(), next, cfg)
	out, err := s.cli("reload", "--config", path, "--address", s.adminAddr)
	if err == nil {
		t.Fatalf("a reload with a bot that does not compile was accepted:\n%s", out)
	}
	if !strings.Contains(out, "bot broken") {
		t.Errorf("the refusal does not name the bot:\n%s", out)
	}

	after := s.adminVersions(t)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: version %q became %q", k, v, after[k])
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s appeared", k)
		}
	}
	// The old config serves: an exchange and the old echo code.
	s.token(t, "alpha-app", "alice-token")
	if r := runEcho(); r.status != 200 || string(r.body) != "hello" {
		t.Fatalf("echo after the refused reload: %d %s", r.status, r.body)
	}

	// Without the broken bot the same reload goes through, whole.
	cfg.Extra = strings.Replace(cfg.Extra, "bot broken", "bot fixed", 1)
	cfg.Extra = strings.Replace(cfg.Extra, "broken.ts", "echo.ts", 1)
	path = writeCaddyfile(t, t.TempDir(), next, cfg)
	if out, err := s.cli("reload", "--config", path, "--address", s.adminAddr); err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	if r := runEcho(); r.status != 200 || string(r.body) != "HELLO" {
		t.Fatalf("echo after the reload: %d %s", r.status, r.body)
	}
	if ids := s.adminList(t, "Bot"); len(ids) != 3 {
		t.Fatalf("bots after the reload: %v", ids)
	}
}

// TestConfigValidateWritesNothing runs `caddy validate` on a config with
// declarations against a storage directory no Caddy holds: it reports the
// config valid (or, with a broken bot, invalid) and the store stays empty.
func TestConfigValidateWritesNothing(t *testing.T) {
	cfg := faultConfig{stackConfig: stackConfig{Admin: freePort(t), Gateway: freePort(t), IdP: "http://127.0.0.1:9", Backend: "127.0.0.1:9", Testdata: copyBots(t)}}
	cfg.Storage = filepath.Join(t.TempDir(), "data")
	validate := func(config string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, caddyBin, "validate", "--config", config)
		home := t.TempDir()
		cmd.Dir = home
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CONFIG_HOME="+filepath.Join(home, "config"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	countKeys := func() int {
		kv, err := badgerkv.Open(badgerkv.Options{Dir: cfg.Storage})
		if err != nil {
			t.Fatal(err)
		}
		defer kv.Close()
		n := 0
		err = kv.View(context.Background(), func(tx store.Txn) error {
			return tx.Scan(nil, false, func(_, _ []byte) error { n++; return nil })
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	cfg.Extra = `bot shout {
				source ` + cfg.Testdata + `/shout.ts
			}`
	if out, err := validate(writeCaddyfile(t, t.TempDir(), configLoadCaddyfile, cfg)); err != nil || !strings.Contains(out, "Valid configuration") {
		t.Fatalf("caddy validate: %v\n%s", err, out)
	}
	if n := countKeys(); n != 0 {
		t.Fatalf("caddy validate wrote %d keys", n)
	}

	cfg.Extra += `
			bot broken {
				source ` + cfg.Testdata + `/broken.ts
			}`
	out, err := validate(writeCaddyfile(t, t.TempDir(), configLoadCaddyfile, cfg))
	if err == nil || !strings.Contains(out, "bot broken") {
		t.Fatalf("caddy validate of a broken bot: %v\n%s", err, out)
	}
	if n := countKeys(); n != 0 {
		t.Fatalf("a refused caddy validate wrote %d keys", n)
	}
}

// portOf returns the port of a host:port or URL.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	addr = strings.TrimPrefix(addr, "http://")
	i := strings.LastIndex(addr, ":")
	p, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

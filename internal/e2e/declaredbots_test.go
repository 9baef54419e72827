package e2e

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// declaredBotsConfig is the template data of declaredBotsCaddyfile.
type declaredBotsConfig struct {
	Admin, Gateway int
	IdP, Backend   string
	Testdata       string
	NarrowScope    string // the narrow bot's scope line, "" for none
}

// declaredBotsCaddyfile: bots whose identity and schedule are declared in
// the Caddyfile: one running as itself with a scope that lacks the write
// its code makes, one running as its caller, one on a schedule of every
// minute.
var declaredBotsCaddyfile = alphaCaddyfile(`			user pat@example.com {
				profile Patient/p1
			}
			user doc@example.com {
				profile Practitioner/d1
			}
			bot narrow {
				identifier https://example.com/bots|narrow
				source {{.Testdata}}/identity_writer.ts
				{{.NarrowScope}}
			}
			bot as-caller {
				identifier https://example.com/bots|as-caller
				source {{.Testdata}}/identity_writer.ts
				run_as_user
			}
			bot ticker {
				identifier https://example.com/bots|ticker
				source {{.Testdata}}/declared_cron.ts
				cron * * * * *
			}
`, `http://localhost:{{.Gateway}} {
	fhirgate
	reverse_proxy {{.Backend}}
}
`)

// reads are the GETs of path the backend received, as the profile they
// were made as.
func (b *backend) reads(path string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, r := range b.requests {
		if r.Method == http.MethodGet && r.URL.Path == path {
			out = append(out, r.Header.Get("X-Fhirgate-Profile"))
		}
	}
	return out
}

// TestDeclaredBotIdentity: a bot's scope, run_as_user and cron declared in
// the Caddyfile take effect on the built Caddy. The narrow bot, running as
// itself with `scope user/Patient.rs`, is refused the Observation its code
// writes (the backend never sees it) until a reload removes the scope; the
// run_as_user bot writes as its caller (a practitioner: allowed, with the
// caller's identity headers; a patient: refused); the cron bot runs on its
// minute tick as itself with the Bot as input, without being called.
func TestDeclaredBotIdentity(t *testing.T) {
	idp := newIdP(t, map[string]string{
		"pat-token": `{"sub":"sub-pat","email":"pat@example.com","email_verified":true}`,
		"doc-token": `{"sub":"sub-doc","email":"doc@example.com","email_verified":true}`,
	})
	be := newBackend(t)
	cfg := declaredBotsConfig{Admin: freePort(t), Gateway: freePort(t), IdP: idp.URL, Backend: be.URL,
		NarrowScope: "scope user/Patient.rs"}
	cfg.Testdata, _ = filepath.Abs("testdata")
	dir := t.TempDir()
	path := writeCaddyfile(t, dir, declaredBotsCaddyfile, cfg)
	s := &stack{caddyProc: startCaddy(t, path, cfg.Admin), gateway: "http://localhost:" + strconv.Itoa(cfg.Gateway), backend: be}
	started := time.Now()
	narrow := s.botID(t, "alpha", "https://example.com/bots|narrow")
	asCaller := s.botID(t, "alpha", "https://example.com/bots|as-caller")
	ticker := s.botID(t, "alpha", "https://example.com/bots|ticker")
	pat := scopedToken(t, s.gateway, "alpha-app", "pat-token", "patient/*.rs")
	doc := scopedToken(t, s.gateway, "alpha-app", "doc-token", "user/*.cruds")
	execute := func(botID, tok string) response {
		return do(t, "POST", s.gateway+"/fhir/R4/Bot/"+botID+"/$execute", "application/json", `{}`, bearer(tok)...)
	}

	t.Run("a narrow scope refuses the write", func(t *testing.T) {
		r := execute(narrow, doc)
		if r.status != 400 || !strings.Contains(string(r.body), "scope") {
			t.Fatalf("$execute of the narrow bot: %d %s, want its write refused for scope", r.status, r.body)
		}
		if got := be.observationWrites(); len(got) != 0 {
			t.Fatalf("the refused write reached the backend: %v", got)
		}
	})

	t.Run("run_as_user writes as the caller", func(t *testing.T) {
		r := execute(asCaller, doc)
		if out := r.json(t); r.status != 200 || out["created"] != "new-1" {
			t.Fatalf("$execute as the practitioner: %d %s", r.status, r.body)
		}
		if got := be.observationWrites(); len(got) != 1 || !strings.HasPrefix(got[0], "Practitioner/d1 ") {
			t.Fatalf("the backend's Observation writes: %v, want one as Practitioner/d1", got)
		}
		if r := execute(asCaller, pat); r.status != 400 || !strings.Contains(string(r.body), "scope") {
			t.Fatalf("$execute as the patient: %d %s, want the write refused for the patient's scope", r.status, r.body)
		}
		if got := be.observationWrites(); len(got) != 1 {
			t.Fatalf("the patient's refused write reached the backend: %v", got)
		}
	})

	t.Run("a reload without the scope gives the bot full access", func(t *testing.T) {
		cfg.NarrowScope = ""
		writeCaddyfile(t, dir, declaredBotsCaddyfile, cfg)
		if out, err := s.cli("reload", "--config", path, "--address", s.adminAddr); err != nil {
			t.Fatalf("reload: %v\n%s", err, out)
		}
		r := execute(narrow, pat)
		if out := r.json(t); r.status != 200 || out["created"] != "new-1" {
			t.Fatalf("$execute of the bot without its scope: %d %s", r.status, r.body)
		}
		if got := be.observationWrites(); len(got) != 2 || got[1] != "Bot/"+narrow+" auth=" {
			t.Fatalf("the backend's Observation writes: %v, want the second as Bot/%s", got, narrow)
		}
	})

	t.Run("the cron bot runs on its tick", func(t *testing.T) {
		// Ticks are minutes: the first scan after the start covers one.
		deadline := started.Add(80 * time.Second)
		for {
			got := be.reads("/fhir/R4/Patient/cron-ticker")
			if len(got) > 0 {
				if got[0] != "Bot/"+ticker {
					t.Fatalf("the tick's read was made as %q, want Bot/%s", got[0], ticker)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no tick of the cron bot within %s of the start\n%s", time.Since(started).Round(time.Second), s.logs())
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}

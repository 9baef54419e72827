package e2e

import (
	"bufio"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// identityConfig is the template data of identityCaddyfile.
type identityConfig struct {
	Admin, Gateway, MLLP int
	IdP, Backend         string
	Testdata             string
}

// identityCaddyfile: two bots with the same code, which writes what a
// patient may not; an MLLP listener into the first; the gateway in front
// of a recording backend.
var identityCaddyfile = alphaCaddyfileWith(`			user pat@example.com {
				profile Patient/p1
			}
			bot writer {
				identifier https://example.com/bots|writer
				source {{.Testdata}}/identity_writer.ts
			}
			bot writer-as-user {
				identifier https://example.com/bots|writer-as-user
				source {{.Testdata}}/identity_writer.ts
			}
`, `	layer4 {
		127.0.0.1:{{.MLLP}} {
			route {
				fhirgate_mllp {
					project alpha
					bot https://example.com/bots|writer
				}
			}
		}
	}
`, `http://localhost:{{.Gateway}} {
	fhirgate
	reverse_proxy {{.Backend}}
}
`)

// setRunAsUser makes a bot run as its caller, through the admin API.
func (s *stack) setRunAsUser(t *testing.T, botID string) {
	t.Helper()
	bot := do(t, "GET", "http://"+s.adminAddr+"/fhirgate/Bot/"+botID, "", "").json(t)
	bot["runAsUser"] = true
	s.adminCall(t, "PUT", "/fhirgate/Bot/"+botID, mustJSON(t, bot))
}

// observationWrites are the Observation creates the backend received, as
// the profile they were made as.
func (b *backend) observationWrites() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, r := range b.requests {
		if r.Method == http.MethodPost && r.URL.Path == "/fhir/R4/Observation" {
			out = append(out, r.Header.Get("X-Fhirgate-Profile")+" auth="+r.Header.Get("Authorization"))
		}
	}
	return out
}

// TestBotIdentity: bots run as themselves (Bot/{id}) unless runAsUser is
// set, on the built Caddy: an MLLP-triggered bot's medplum.createResource
// reaches the backend with the bot's identity headers; a patient-scoped
// caller runs a bot running as itself that writes what the patient may
// not (allowed), and a runAsUser one (denied, the backend never sees the
// write); an async $execute completes when polled.
func TestBotIdentity(t *testing.T) {
	idp := newIdP(t, map[string]string{
		"pat-token": `{"sub":"sub-pat","email":"pat@example.com","email_verified":true}`,
	})
	be := newBackend(t)
	cfg := identityConfig{Admin: freePort(t), Gateway: freePort(t), MLLP: freePort(t), IdP: idp.URL, Backend: be.URL}
	cfg.Testdata, _ = filepath.Abs("testdata")
	s := &stack{caddyProc: startCaddy(t, writeCaddyfile(t, t.TempDir(), identityCaddyfile, cfg), cfg.Admin),
		gateway: "http://localhost:" + strconv.Itoa(cfg.Gateway), backend: be}
	writer := s.botID(t, "alpha", "https://example.com/bots|writer")
	asUser := s.botID(t, "alpha", "https://example.com/bots|writer-as-user")
	s.setRunAsUser(t, asUser)
	pat := scopedToken(t, s.gateway, "alpha-app", "pat-token", "patient/*.rs")

	t.Run("MLLP run writes as the bot", func(t *testing.T) {
		conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(cfg.MLLP))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write(mllpFrame(hl7Message("LAB", "ID-1", "Doe"))); err != nil {
			t.Fatal(err)
		}
		if code, _, text := msa(t, readAck(t, bufio.NewReader(conn), conn)); code != "AA" {
			t.Fatalf("ACK %s %s, want AA", code, text)
		}
		if got := be.observationWrites(); len(got) != 1 || got[0] != "Bot/"+writer+" auth=" {
			t.Fatalf("the backend's Observation writes: %v, want one as Bot/%s", got, writer)
		}
	})

	t.Run("patient runs a bot running as itself", func(t *testing.T) {
		r := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+writer+"/$execute", "application/json", `{}`, bearer(pat)...)
		if out := r.json(t); r.status != 200 || out["created"] != "new-1" || out["requester"] != "Patient/p1" {
			t.Fatalf("$execute: %d %s", r.status, r.body)
		}
		if got := be.observationWrites(); len(got) != 2 || got[1] != "Bot/"+writer+" auth=" {
			t.Fatalf("the backend's Observation writes: %v", got)
		}
	})

	t.Run("patient runs a runAsUser bot", func(t *testing.T) {
		r := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+asUser+"/$execute", "application/json", `{}`, bearer(pat)...)
		if r.status != 400 || !strings.Contains(string(r.body), "scope") {
			t.Fatalf("$execute of the runAsUser bot: %d %s, want its write refused for scope", r.status, r.body)
		}
		if got := be.observationWrites(); len(got) != 2 {
			t.Fatalf("the refused write reached the backend: %v", got)
		}
	})

	t.Run("async $execute completes when polled", func(t *testing.T) {
		r := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+writer+"/$execute", "application/json", `{}`, append(bearer(pat), "Prefer", "respond-async")...)
		loc := r.header.Get("Content-Location")
		if r.status != 202 || loc == "" {
			t.Fatalf("async $execute: %d %s", r.status, r.body)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			p := do(t, "GET", loc, "", "", bearer(pat)...)
			if p.status == 200 {
				if job := p.json(t); job["status"] != "completed" || !strings.Contains(string(p.body), `\"created\":\"new-1\"`) {
					t.Fatalf("job: %s", p.body)
				}
				break
			}
			if p.status != 202 || time.Now().After(deadline) {
				t.Fatalf("polling: %d %s", p.status, p.body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if got := be.observationWrites(); len(got) != 3 || got[2] != "Bot/"+writer+" auth=" {
			t.Fatalf("the queued run's write: %v", got)
		}
	})
}

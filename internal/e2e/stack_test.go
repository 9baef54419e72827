package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/template"
)

// stack is a built Caddy with fhirgate in front of a loopback FHIR backend,
// using a loopback identity provider, configured from a template.
type stack struct {
	*caddyProc
	config  string
	gateway string
	idp     *httptest.Server
	backend *backend
}

// backend is a loopback FHIR server that records what reaches it.
type backend struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
	count    atomic.Int64
}

func newBackend(t *testing.T) *backend {
	b := &backend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.count.Add(1)
		b.mu.Lock()
		b.requests = append(b.requests, r.Clone(r.Context()))
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/fhir+json")
		if r.Method == http.MethodPost && !strings.Contains(r.Header.Get("Content-Type"), "json") {
			// A Binary (Medplum's createAttachment): answer its metadata.
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"resourceType":"Binary","id":"new-1","contentType":"` + r.Header.Get("Content-Type") + `"}`))
			return
		}
		if r.Method == http.MethodPost {
			// Create: echo the resource back with an id, as FHIR servers do.
			body, _ := io.ReadAll(r.Body)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"new-1",` + strings.TrimPrefix(string(body), "{")))
			return
		}
		if strings.Contains(r.URL.Path, "/Patient/missing") {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-found","details":{"text":"Not found"}}]}`))
			return
		}
		// GET /fhir/R4/<Type>/<id> answers that resource, with a name so
		// a test can tell it came from here.
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/fhir/R4/"), "/")
		typ, id := "Patient", parts[len(parts)-1]
		if len(parts) == 2 {
			typ = parts[0]
		}
		_, _ = w.Write([]byte(`{"resourceType":"` + typ + `","id":"` + id + `","name":[{"family":"FromBackend"}]}`))
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) last() *http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.requests) == 0 {
		return nil
	}
	return b.requests[len(b.requests)-1]
}

// userinfoByToken answers a userinfo call from a token → JSON table.
func newIdP(t *testing.T, users map[string]string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := users[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// stackConfig is the template data.
type stackConfig struct {
	Admin, Gateway int
	IdP, Backend   string
	Testdata       string
	Extra          string // more global fhirgate options
}

const stackCaddyfile = `{
	admin localhost:{{.Admin}}
	skip_install_trust
	fhirgate {
		storage_dir ./data
		issuer http://localhost:{{.Gateway}}
		{{.Extra}}
		project alpha {
			client alpha-app {
				userinfo_url {{.IdP}}/userinfo
			}
			client alpha-sub {
				userinfo_url {{.IdP}}/userinfo
				use_subject
			}
			user alice@example.com {
				profile Practitioner/alice
				external_id sub-alice
				admin
			}
			bot echo {
				identifier https://example.com/bots|echo
				source {{.Testdata}}/echo.ts
			}
			bot misbehave {
				identifier https://example.com/bots|misbehave
				source {{.Testdata}}/misbehave.js
			}
			bot quiet {
				identifier https://example.com/bots|quiet
				source {{.Testdata}}/misbehave.js
				audit_event_trigger on-error
			}
			bot fhirclient {
				identifier https://example.com/bots|fhirclient
				source {{.Testdata}}/fhirclient.ts
			}
			bot caller {
				identifier https://example.com/bots|caller
				source {{.Testdata}}/caller.ts
			}
			bot hl7ack {
				identifier https://example.com/bots|hl7ack
				source {{.Testdata}}/hl7ack.ts
			}
		}
		project beta {
			client beta-app {
				userinfo_url {{.IdP}}/userinfo
			}
			user bob@example.com {
				profile Practitioner/bob
			}
			bot echo {
				identifier https://example.com/bots|echo
				source {{.Testdata}}/misbehave.js
			}
		}
	}
}

http://localhost:{{.Gateway}} {
	fhirgate {
		fhir_base /fhir/R4
		max_body 64KB
	}
	reverse_proxy {{.Backend}}
}
`

func startStack(t *testing.T, extra string) *stack {
	t.Helper()
	return startStackWith(t, stackCaddyfile, extra)
}

// startStackWith starts a Caddy from a Caddyfile template (executed with
// stackConfig), with a loopback identity provider that knows alice-token
// and bob-token, and a recording loopback FHIR backend.
func startStackWith(t *testing.T, tmpl, extra string) *stack {
	t.Helper()
	idp := newIdP(t, map[string]string{
		"alice-token": `{"sub":"sub-alice","email":"alice@example.com","email_verified":true}`,
		"bob-token":   `{"sub":"sub-bob","email":"bob@example.com"}`,
	})
	be := newBackend(t)
	cfg := stackConfig{Admin: freePort(t), Gateway: freePort(t), IdP: idp.URL, Backend: be.URL, Extra: extra}
	cfg.Testdata, _ = filepath.Abs("testdata")
	path := filepath.Join(t.TempDir(), "Caddyfile")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	err = template.Must(template.New("caddyfile").Parse(tmpl)).Execute(f, cfg)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	p := startCaddy(t, path, cfg.Admin)
	return &stack{caddyProc: p, config: path, gateway: "http://localhost:" + strconv.Itoa(cfg.Gateway), idp: idp, backend: be}
}

// token exchanges an identity provider token through a client.
func (s *stack) token(t *testing.T, client, subject string) string {
	t.Helper()
	form := url.Values{
		"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"client_id":          {client},
		"subject_token":      {subject},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}
	r := do(t, "POST", s.gateway+"/oauth2/token", "application/x-www-form-urlencoded", form.Encode())
	if r.status != 200 {
		t.Fatalf("exchange for %s: %d %s", client, r.status, r.body)
	}
	return r.json(t)["access_token"].(string)
}

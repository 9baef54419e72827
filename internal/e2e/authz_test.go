package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// scopedToken exchanges an identity provider token through a client,
// asking for scope.
func scopedToken(t *testing.T, gw, client, subject, scope string) string {
	t.Helper()
	form := url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "client_id": {client},
		"subject_token": {subject}, "subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
		"scope": {scope},
	}
	r := do(t, "POST", gw+"/oauth2/token", "application/x-www-form-urlencoded", form.Encode())
	if r.status != 200 {
		t.Fatalf("exchange with scope %q: %d %s", scope, r.status, r.body)
	}
	return r.json(t)["access_token"].(string)
}

// authzBackend is a loopback FHIR backend holding one Observation of each
// of two patients; it records every request that reaches it.
type authzBackend struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newAuthzBackend(t *testing.T) *authzBackend {
	b := &authzBackend{}
	obs := func(id, patient string) string {
		return `{"resourceType":"Observation","id":"` + id + `","status":"final","code":{"text":"heart rate"},"subject":{"reference":"Patient/` + patient + `"}}`
	}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.seen = append(b.seen, r.Method+" "+r.URL.RequestURI())
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/fhir+json")
		p := strings.TrimPrefix(r.URL.Path, "/fhir/R4/")
		switch {
		case r.Method == http.MethodGet && p == "Observation/o1":
			_, _ = io.WriteString(w, obs("o1", "p1"))
		case r.Method == http.MethodGet && p == "Observation/o2":
			_, _ = io.WriteString(w, obs("o2", "p2"))
		case r.Method == http.MethodGet && p == "Observation":
			_, _ = io.WriteString(w, `{"resourceType":"Bundle","type":"searchset","entry":[{"resource":`+obs("o1", "p1")+`}]}`)
		case r.Method == http.MethodGet && p == "Patient/p1":
			_, _ = io.WriteString(w, `{"resourceType":"Patient","id":"p1"}`)
		case r.Method == http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(body)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-found"}]}`)
		}
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *authzBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.seen)
}

var authzCaddyfile = alphaCaddyfile(`			user doc@example.com {
				profile Practitioner/d1
			}
			user pat@example.com {
				profile Patient/p1
			}
`, fhirSite(`		allow_operation $match s
`))

// TestAuthorizationAtTheGate runs the built Caddy in front of a recording
// backend: scoped tokens are refused what their scopes do not allow, a
// patient-context token is confined to its patient, and nothing refused
// up front reaches the backend.
func TestAuthorizationAtTheGate(t *testing.T) {
	idp := newIdP(t, map[string]string{
		"doc-token": `{"sub":"sub-doc","email":"doc@example.com","email_verified":true}`,
		"pat-token": `{"sub":"sub-pat","email":"pat@example.com","email_verified":true}`,
	})
	be := newAuthzBackend(t)
	cfg := stackConfig{Admin: freePort(t), Gateway: freePort(t), IdP: idp.URL, Backend: be.URL}
	startCaddy(t, writeCaddyfile(t, t.TempDir(), authzCaddyfile, cfg), cfg.Admin)
	gw := "http://localhost:" + strconv.Itoa(cfg.Gateway)

	token := func(subject, scope string) string {
		t.Helper()
		return scopedToken(t, gw, "alpha-app", subject, scope)
	}
	call := func(tok, method, p, body string) response {
		t.Helper()
		return do(t, method, gw+"/fhir/R4/"+p, "application/fhir+json", body, "Authorization", "Bearer "+tok)
	}
	refused := func(what string, r response, names string) {
		t.Helper()
		if r.status != 403 || !strings.Contains(string(r.body), `"resourceType":"OperationOutcome"`) || !strings.Contains(string(r.body), names) {
			t.Errorf("%s: %d %s; want a 403 OperationOutcome naming %s", what, r.status, r.body, names)
		}
	}

	// A user/Observation.rs token reads and searches, and cannot create.
	rs := token("doc-token", "openid user/Observation.rs")
	if r := call(rs, "GET", "Observation/o1", ""); r.status != 200 || !strings.Contains(string(r.body), `"o1"`) {
		t.Fatalf("user/Observation.rs read: %d %s", r.status, r.body)
	}
	before := be.count()
	refused("user/Observation.rs create", call(rs, "POST", "Observation", `{"resourceType":"Observation","status":"final"}`), "Observation.c")
	refused("user/Observation.rs read of a Patient", call(rs, "GET", "Patient/p1", ""), "Patient.r")
	refused("user/Observation.rs _include of Patient", call(rs, "GET", "Observation?_include=Observation:patient", ""), "Patient.s")
	refused("an unknown operation", call(rs, "POST", "Observation/$frobnicate", "{}"), "$frobnicate")
	if n := be.count() - before; n != 0 {
		t.Fatalf("%d refused requests reached the backend: %v", n, be.seen[before:])
	}

	// A patient-context token reads its own Observations and is refused
	// another patient's.
	pat := token("pat-token", "openid launch/patient patient/Observation.rs patient/Patient.r")
	if r := call(pat, "GET", "Observation/o1", ""); r.status != 200 || !strings.Contains(string(r.body), `"Patient/p1"`) {
		t.Fatalf("own Observation: %d %s", r.status, r.body)
	}
	if r := call(pat, "GET", "Observation?patient=p1", ""); r.status != 200 || !strings.Contains(string(r.body), `"o1"`) {
		t.Fatalf("own Observations: %d %s", r.status, r.body)
	}
	if r := call(pat, "GET", "Patient/p1", ""); r.status != 200 {
		t.Fatalf("own Patient: %d %s", r.status, r.body)
	}
	// The backend answers another patient's Observation; the client gets
	// a 403 and none of it.
	r := call(pat, "GET", "Observation/o2", "")
	refused("another patient's Observation", r, "outside the token's patient compartment")
	if strings.Contains(string(r.body), "heart rate") {
		t.Fatalf("the refused answer leaked the resource: %s", r.body)
	}
	before = be.count()
	refused("another Patient", call(pat, "GET", "Patient/p2", ""), "Patient/p1")
	refused("a search without the patient", call(pat, "GET", "Observation?code=x", ""), "patient")
	refused("a search of another patient", call(pat, "GET", "Observation?patient=p2", ""), "patient")
	refused("a create with rs", call(pat, "POST", "Observation", `{"resourceType":"Observation","subject":{"reference":"Patient/p1"}}`), "Observation.c")
	if n := be.count() - before; n != 0 {
		t.Fatalf("%d refused requests reached the backend: %v", n, be.seen[before:])
	}
}

// TestAuthorizationBotCalls: the FHIR calls of a bot that runs as its
// caller (runAsUser) follow the caller's scopes; $execute needs r on Bot.
func TestAuthorizationBotCalls(t *testing.T) {
	s := startStack(t, "")
	s.setRunAsUser(t, s.botID(t, "alpha", "https://example.com/bots|fhirclient"))
	u := s.gateway + "/fhir/R4/Bot/$execute?identifier=" + url.QueryEscape("https://example.com/bots|fhirclient")
	run := func(scope string) response {
		t.Helper()
		tok := scopedToken(t, s.gateway, "alpha-app", "alice-token", scope)
		return do(t, "POST", u, "application/json", `{"patientId":"p-42"}`, "Authorization", "Bearer "+tok)
	}
	before := s.backend.count.Load()
	if r := run("openid user/Patient.r user/Observation.c"); r.status != 403 || !strings.Contains(string(r.body), "Bot.r") {
		t.Fatalf("$execute without r on Bot: %d %s", r.status, r.body)
	}
	// The bot reads the Patient, and its create is refused at the gate:
	// the promise rejects with the OperationOutcome's text.
	r := run("openid user/Bot.r user/Patient.r")
	if r.status != 400 || !strings.Contains(string(r.body), "Observation.c") {
		t.Fatalf("a bot create beyond the caller's scopes: %d %s", r.status, r.body)
	}
	s.backend.mu.Lock()
	reqs := append([]*http.Request(nil), s.backend.requests...)
	s.backend.mu.Unlock()
	if n := s.backend.count.Load() - before; n != 1 || reqs[len(reqs)-1].Method != "GET" {
		t.Fatalf("the backend saw %d requests, the last %s; want the Patient read only", n, reqs[len(reqs)-1].Method)
	}
	if r := run("openid user/Bot.r user/Patient.r user/Observation.c"); r.status != 200 {
		t.Fatalf("a bot within the caller's scopes: %d %s", r.status, r.body)
	}
}

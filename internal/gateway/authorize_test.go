package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/gateway/gatewaytest"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// recordingBackend is a loopback FHIR backend holding two patients'
// Observations; it records every request it sees.
type recordingBackend struct {
	mu   sync.Mutex
	seen []string
}

func (b *recordingBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.seen = append(b.seen, r.Method+" "+r.URL.RequestURI())
	b.mu.Unlock()
	obs := func(id, patient string) string {
		return `{"resourceType":"Observation","id":"` + id + `","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/` + patient + `"}}`
	}
	w.Header().Set("Content-Type", "application/fhir+json")
	p := strings.TrimPrefix(r.URL.Path, "/fhir/R4/")
	switch {
	case r.Method == http.MethodGet && p == "Observation/o1":
		_, _ = io.WriteString(w, obs("o1", "p1"))
	case r.Method == http.MethodGet && p == "Observation/o2":
		_, _ = io.WriteString(w, obs("o2", "p2"))
	case r.Method == http.MethodGet && p == "Observation":
		// A lenient backend: it answers every Observation whatever the query.
		_, _ = io.WriteString(w, `{"resourceType":"Bundle","type":"searchset","entry":[{"resource":`+obs("o1", "p1")+`}`)
		if r.URL.Query().Get("patient") != "p1" {
			_, _ = io.WriteString(w, `,{"resource":`+obs("o2", "p2")+`}`)
		}
		_, _ = io.WriteString(w, `]}`)
	case r.Method == http.MethodPost || r.Method == http.MethodPut:
		w.WriteHeader(http.StatusCreated)
		_, _ = io.Copy(w, r.Body)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-found"}]}`)
	}
}

func (b *recordingBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.seen)
}

func (b *recordingBackend) saw(req string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.seen {
		if s == req {
			return true
		}
	}
	return false
}

// authzFixture is the real gateway (real OAuth server and store) served
// over HTTP in front of a recording loopback backend, with a practitioner
// and two patient users.
type authzFixture struct {
	t       *testing.T
	auth    *oauth.Server
	srv     *httptest.Server
	backend *recordingBackend
}

func newAuthzFixture(t *testing.T) *authzFixture {
	t.Helper()
	return newAuthzFixtureOps(t, nil)
}

// newAuthzFixtureOps is newAuthzFixture with fhirgate operations.
func newAuthzFixtureOps(t *testing.T, ops func(gateway.Target) gateway.Operation) *authzFixture {
	t.Helper()
	st := storetest.Open(t)
	ctx := context.Background()
	idp := gatewaytest.IdentityProvider(t)
	proj := &store.Project{Name: "P"}
	proj.ID = "p"
	client := &store.ClientApplication{Name: "c", IdentityProvider: &store.IdentityProvider{UserInfoURL: idp.URL}}
	client.ID, client.Meta.Project = "c", "p"
	rs := []store.Resource{proj, client}
	for _, u := range []struct{ name, profile string }{{"doc", "Practitioner/d1"}, {"pat1", "Patient/p1"}, {"pat2", "Patient/p2"}} {
		user := &store.User{Email: u.name + "@example.com"}
		user.ID = "u-" + u.name
		m := &store.ProjectMembership{
			Project: store.Reference{Reference: "Project/p"}, User: store.Reference{Reference: "User/" + user.ID},
			Profile: &store.Reference{Reference: u.profile},
		}
		m.ID = "m-" + u.name
		rs = append(rs, user, m)
	}
	for _, r := range rs {
		if _, err := st.Put(ctx, r, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	auth := gatewaytest.OAuth(t, st)
	gw, err := gateway.New(gateway.Options{OAuth: auth, AllowedOperations: map[string]string{"$match": "s"}, Operations: ops})
	if err != nil {
		t.Fatal(err)
	}
	b := &recordingBackend{}
	be := httptest.NewServer(b)
	t.Cleanup(be.Close)
	return &authzFixture{t: t, auth: auth, srv: gatewaytest.Serve(t, gw, be.URL), backend: b}
}

// token exchanges name's identity-provider token for one with scope.
func (f *authzFixture) token(name, scope string) string {
	f.t.Helper()
	resp, _, e := f.auth.Exchange(context.Background(), oauth.ExchangeRequest{ClientID: "c", SubjectToken: gatewaytest.SubjectToken(name), Scope: scope})
	if e != nil {
		f.t.Fatalf("token exchange for %s: %v", name, e)
	}
	return resp.AccessToken
}

func (f *authzFixture) do(tok, method, path, body string) (int, string) {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+"/fhir/R4/"+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/fhir+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func TestGatewayAuthorizesScopes(t *testing.T) {
	f := newAuthzFixture(t)
	obs := `{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p1"}}`

	rs := f.token("doc", "openid user/Observation.rs")
	if st, body := f.do(rs, "GET", "Observation/o1", ""); st != 200 || !strings.Contains(body, `"o1"`) {
		t.Fatalf("user/Observation.rs read: %d %s", st, body)
	}
	before := f.backend.count()
	st, body := f.do(rs, "POST", "Observation", obs)
	if st != 403 || !strings.Contains(body, "Observation.c") || !strings.Contains(body, "OperationOutcome") {
		t.Fatalf("user/Observation.rs create: %d %s; want 403 naming Observation.c", st, body)
	}
	if st, _ := f.do(rs, "GET", "Patient/p1", ""); st != 403 {
		t.Fatalf("user/Observation.rs read of a Patient: %d", st)
	}
	if st, _ := f.do(rs, "GET", "Observation?_include=Observation:patient", ""); st != 403 {
		t.Fatalf("an _include of Patient without Patient.s: %d", st)
	}
	if f.backend.count() != before {
		t.Fatalf("denied requests reached the backend: %v", f.backend.seen[before:])
	}

	full := f.token("doc", "openid offline")
	if st, _ := f.do(full, "POST", "Observation", obs); st != 201 {
		t.Fatalf("a token without resource scopes (full access) create: %d", st)
	}
	before = f.backend.count()
	if st, _ := f.do(full, "POST", "Patient/$frobnicate", "{}"); st != 403 {
		t.Fatalf("unknown operation: %d", st)
	}
	if st, _ := f.do(full, "POST", "Patient/$match", "{}"); st == 403 {
		t.Fatal("a configured operation was refused")
	}
	if f.backend.count() != before+1 {
		t.Fatalf("backend saw %v", f.backend.seen[before:])
	}
}

func TestGatewayPatientContext(t *testing.T) {
	f := newAuthzFixture(t)
	tok := f.token("pat1", "openid launch/patient patient/Observation.crus patient/Patient.r")

	if st, body := f.do(tok, "GET", "Observation/o1", ""); st != 200 || !strings.Contains(body, `"o1"`) {
		t.Fatalf("own Observation: %d %s", st, body)
	}
	if st, body := f.do(tok, "GET", "Observation?patient=p1", ""); st != 200 || !strings.Contains(body, `"o1"`) {
		t.Fatalf("own Observations search: %d %s", st, body)
	}
	// The backend answers another patient's Observation: the gate refuses
	// the answer and none of it reaches the client.
	st, body := f.do(tok, "GET", "Observation/o2", "")
	if st != 403 || strings.Contains(body, "o2\"") || strings.Contains(body, `"status":"final"`) {
		t.Fatalf("other patient's Observation: %d %s", st, body)
	}
	before := f.backend.count()
	for _, c := range []struct{ method, path, body string }{
		{"GET", "Patient/p2", ""},
		{"GET", "Observation?code=x", ""},
		{"GET", "Observation?patient=p2", ""},
		{"POST", "Observation", strings.Replace(`{"resourceType":"Observation","subject":{"reference":"Patient/p2"}}`, "\n", "", -1)},
		{"DELETE", "Observation/o1", ""},
	} {
		if st, body := f.do(tok, c.method, c.path, c.body); st != 403 {
			t.Errorf("%s %s: %d %s, want 403", c.method, c.path, st, body)
		}
	}
	if f.backend.count() != before {
		t.Fatalf("denied requests reached the backend: %v", f.backend.seen[before:])
	}
	// An update of another patient's stored Observation, re-pointed at
	// this patient: the gate reads the stored one and refuses; the PUT
	// never reaches the backend.
	st, _ = f.do(tok, "PUT", "Observation/o2", `{"resourceType":"Observation","id":"o2","subject":{"reference":"Patient/p1"}}`)
	if st != 403 || f.backend.saw("PUT /fhir/R4/Observation/o2") || !f.backend.saw("GET /fhir/R4/Observation/o2") {
		t.Fatalf("update of another patient's Observation: %d, backend saw %v", st, f.backend.seen)
	}
	if st, _ := f.do(tok, "PUT", "Observation/o1", `{"resourceType":"Observation","id":"o1","subject":{"reference":"Patient/p1"}}`); st != 201 {
		t.Fatalf("update of own Observation: %d", st)
	}
	if st, _ := f.do(tok, "POST", "Observation", `{"resourceType":"Observation","subject":{"reference":"Patient/p1"}}`); st != 201 {
		t.Fatalf("create of own Observation: %d", st)
	}

	// The other patient's token is confined to its own compartment.
	tok2 := f.token("pat2", "patient/Observation.rs")
	if st, _ := f.do(tok2, "GET", "Observation/o1", ""); st != 403 {
		t.Fatalf("p2 reading p1's Observation: %d", st)
	}
}

// TestGatewayAuthorizesBotCalls: a bot's FHIR calls (through Backend) are
// decided against the caller's scopes, and $execute itself needs r on Bot.
func TestGatewayAuthorizesBotCalls(t *testing.T) {
	var f *authzFixture
	f = newAuthzFixtureOps(t, func(tg gateway.Target) gateway.Operation {
		if tg.Type != "Bot" || tg.Operation != "$execute" {
			return nil
		}
		return func(w http.ResponseWriter, r *http.Request, _ *oauth.Identity, be *gateway.Backend) {
			resp, err := be.Do(r.Context(), http.MethodGet, "Observation/o1", nil, nil, nil)
			if err != nil {
				t.Errorf("backend call: %v", err)
				return
			}
			w.WriteHeader(resp.Status)
			_, _ = w.Write(resp.Body)
		}
	})
	if st, _ := f.do(f.token("doc", "user/Observation.r"), "POST", "Bot/b1/$execute", "{}"); st != 403 {
		t.Fatalf("$execute without r on Bot: %d", st)
	}
	before := f.backend.count()
	st, body := f.do(f.token("doc", "user/Bot.r"), "POST", "Bot/b1/$execute", "{}")
	if st != 403 || !strings.Contains(body, "Observation.r") || f.backend.count() != before {
		t.Fatalf("a bot call beyond the caller's scopes: %d %s, backend saw %v", st, body, f.backend.seen[before:])
	}
	if st, body := f.do(f.token("doc", "user/Bot.r user/Observation.r"), "POST", "Bot/b1/$execute", "{}"); st != 200 || !strings.Contains(body, `"o1"`) {
		t.Fatalf("a bot call within the caller's scopes: %d %s", st, body)
	}
	// In a patient context the bot's read of another patient's
	// Observation is refused after the backend answered.
	if st, body := f.do(f.token("pat2", "patient/Bot.r patient/Observation.r"), "POST", "Bot/b1/$execute", "{}"); st != 403 || strings.Contains(body, `"status":"final"`) {
		t.Fatalf("a bot call outside the patient's compartment: %d %s", st, body)
	}
}

// TestGatewayQueryThatDoesNotParse: a scoped token's request whose query
// the gate cannot read is refused; a full-access token's passes as before.
func TestGatewayQueryThatDoesNotParse(t *testing.T) {
	f := newAuthzFixture(t)
	before := f.backend.count()
	if st, _ := f.do(f.token("doc", "user/Observation.rs"), "GET", "Observation?code=%zz", ""); st != 400 {
		t.Fatalf("scoped token, bad query: %d", st)
	}
	if f.backend.count() != before {
		t.Fatal("the refused request reached the backend")
	}
	if st, _ := f.do(f.token("doc", "openid"), "GET", "Observation/o1?x=%zz", ""); st != 200 {
		t.Fatalf("full-access token, bad query: %d", st)
	}
}

package session

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/gateway/gatewaytest"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// fixture is /auth/me behind a real gateway: a real Badger store, real
// OAuth token exchange against a loopback identity provider, and a
// loopback FHIR backend reached through a reverse proxy. Each user's
// membership names a different profile, so each token exercises one way
// the backend can answer for it.
type fixture struct {
	st      *store.Store
	h       *Handler
	srv     *httptest.Server
	logs    *observer.ObservedLogs
	project *store.Project
	members map[string]*store.ProjectMembership // by user name
	tokens  map[string]string                   // by user name

	mu      sync.Mutex
	backend []*http.Request // what the FHIR backend received
}

// profiles are the users and their membership profiles.
var profiles = map[string]string{
	"alice": "Practitioner/p1",         // the backend has it
	"bob":   "Practitioner/gone",       // the backend answers 404
	"carol": "Patient/odd",             // the backend answers another patient
	"dave":  "RelatedPerson/html",      // the backend answers HTML
	"erin":  "ClientApplication/app-1", // not a backend profile
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{st: storetest.Open(t), members: map[string]*store.ProjectMembership{}, tokens: map[string]string{}}
	idp := gatewaytest.IdentityProvider(t)
	fhirSrv := httptest.NewServer(http.HandlerFunc(f.serveBackend))
	t.Cleanup(fhirSrv.Close)

	f.project = &store.Project{Name: "Clinic", Description: "the east wing"}
	f.create(t, f.project)
	client := &store.ClientApplication{Name: "app", IdentityProvider: &store.IdentityProvider{UserInfoURL: idp.URL}}
	client.Meta.Project = f.project.ID
	f.create(t, client)
	for name, profile := range profiles {
		user := &store.User{Email: name + "@example.com"}
		f.create(t, user)
		m := &store.ProjectMembership{
			Project: store.Reference{Reference: "Project/" + f.project.ID}, User: store.Reference{Reference: "User/" + user.ID},
			Profile: &store.Reference{Reference: profile}, Admin: name == "alice",
		}
		if name == "alice" {
			m.AccessPolicy = &store.Reference{Reference: "AccessPolicy/ap-1"}
		}
		f.create(t, m)
		f.members[name] = m
	}
	auth := gatewaytest.OAuth(t, f.st)
	for name := range profiles {
		f.tokens[name] = gatewaytest.AccessToken(t, auth, client.ID, name)
	}

	core, logs := observer.New(zapcore.DebugLevel)
	f.logs = logs
	f.h = &Handler{Store: f.st, Logger: zap.New(core)}
	gw, err := gateway.New(gateway.Options{FHIRBase: "/fhir/R4", OAuth: auth, Me: f.h.Serve})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = gatewaytest.Serve(t, gw, fhirSrv.URL)
	return f
}

func (f *fixture) create(t *testing.T, r store.Resource) {
	t.Helper()
	if err := f.st.Create(context.Background(), r, store.PutOptions{}); err != nil {
		t.Fatalf("creating %T: %v", r, err)
	}
}

func (f *fixture) serveBackend(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.backend = append(f.backend, r.Clone(context.Background()))
	f.mu.Unlock()
	switch r.URL.Path {
	case "/fhir/R4/Practitioner/p1":
		w.Header().Set("Content-Type", "application/fhir+json")
		_, _ = io.WriteString(w, `{"resourceType":"Practitioner","id":"p1","name":[{"given":["Alice"],"family":"Hart"}]}`)
	case "/fhir/R4/Patient/odd":
		w.Header().Set("Content-Type", "application/fhir+json")
		_, _ = io.WriteString(w, `{"resourceType":"Patient","id":"someone-else","name":[{"family":"Other"}]}`)
	case "/fhir/R4/RelatedPerson/html":
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<html>maintenance</html>`)
	default:
		w.Header().Set("Content-Type", "application/fhir+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-found"}]}`)
	}
}

func (f *fixture) backendPaths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.backend {
		out = append(out, r.Method+" "+r.URL.Path)
	}
	return out
}

// me sends method /auth/me with the user's token and decodes the answer.
func (f *fixture) me(t *testing.T, method, user string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+"/auth/me", nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+f.tokens[user])
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("%s /auth/me as %s: %d, body not JSON: %s", method, user, resp.StatusCode, body)
		}
	}
	return resp, m
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestMeAnswersMedplumsSession: GET /auth/me answers the session in
// Medplum's shape, from the store, with the profile as the backend has
// it, read as the caller; it is not cached by the client.
func TestMeAnswersMedplumsSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resp, me := f.me(t, http.MethodGet, "alice")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /auth/me: %d %v", resp.StatusCode, me)
	}
	if ct, cc := resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"); !strings.HasPrefix(ct, "application/json") || cc != "no-store" {
		t.Errorf("Content-Type %q, Cache-Control %q", ct, cc)
	}
	m := f.members["alice"]
	want := map[string]string{
		"project":      `{"description":"the east wing","id":"` + f.project.ID + `","name":"Clinic","resourceType":"Project"}`,
		"membership":   `{"admin":true,"id":"` + m.ID + `","profile":{"reference":"Practitioner/p1"},"project":{"reference":"Project/` + f.project.ID + `"},"resourceType":"ProjectMembership","user":` + asJSON(m.User) + `}`,
		"profile":      `{"id":"p1","name":[{"family":"Hart","given":["Alice"]}],"resourceType":"Practitioner"}`,
		"config":       `{"resourceType":"UserConfiguration"}`,
		"accessPolicy": `{"id":"ap-1","resourceType":"AccessPolicy"}`,
	}
	for key, w := range want {
		if got := asJSON(me[key]); got != w {
			t.Errorf("%s\n got %s\nwant %s", key, got, w)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.backend) != 1 {
		t.Fatalf("the backend got %d requests, want the profile read", len(f.backend))
	}
	r := f.backend[0]
	if r.Method != "GET" || r.URL.Path != "/fhir/R4/Practitioner/p1" || r.Header.Get("X-Fhirgate-Profile") != "Practitioner/p1" ||
		r.Header.Get("X-Fhirgate-Project") != f.project.ID || r.Header.Get("Authorization") != "" {
		t.Errorf("profile read: %s %s, profile %q project %q authorization %q", r.Method, r.URL.Path,
			r.Header.Get("X-Fhirgate-Profile"), r.Header.Get("X-Fhirgate-Project"), r.Header.Get("Authorization"))
	}
}

// TestMeFallsBackToAMinimalProfile: when the backend cannot give the
// caller's profile (missing, another resource, not JSON) or the profile
// is not one the backend keeps, the session still answers, with a profile
// of just its type and id, and without the fields the membership lacks.
func TestMeFallsBackToAMinimalProfile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tests := []struct {
		user, profile, asked string
	}{
		{"bob", `{"id":"gone","resourceType":"Practitioner"}`, "GET /fhir/R4/Practitioner/gone"},
		{"carol", `{"id":"odd","resourceType":"Patient"}`, "GET /fhir/R4/Patient/odd"},
		{"dave", `{"id":"html","resourceType":"RelatedPerson"}`, "GET /fhir/R4/RelatedPerson/html"},
		{"erin", `{"id":"app-1","resourceType":"ClientApplication"}`, ""},
	}
	for _, tc := range tests {
		f.mu.Lock()
		f.backend = nil
		f.mu.Unlock()
		resp, me := f.me(t, http.MethodGet, tc.user)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %v", tc.user, resp.StatusCode, me)
			continue
		}
		if got := asJSON(me["profile"]); got != tc.profile {
			t.Errorf("%s: profile %s, want %s", tc.user, got, tc.profile)
		}
		if _, ok := me["accessPolicy"]; ok {
			t.Errorf("%s: an accessPolicy without one in the membership", tc.user)
		}
		if me["membership"].(map[string]any)["admin"] != false {
			t.Errorf("%s: membership %v", tc.user, me["membership"])
		}
		if got := strings.Join(f.backendPaths(), ", "); got != tc.asked {
			t.Errorf("%s: the backend was asked %q, want %q", tc.user, got, tc.asked)
		}
	}
}

// TestMeRefusals: only GET and HEAD are answered; a caller without a
// token gets the gateway's 401; a session whose project or membership is
// gone is a 500 that is logged, not shown.
func TestMeRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resp, body := f.me(t, http.MethodPost, "alice")
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET" || body["resourceType"] != "OperationOutcome" {
		t.Errorf("POST /auth/me: %d Allow %q %v", resp.StatusCode, resp.Header.Get("Allow"), body)
	}
	if resp, _ := f.me(t, http.MethodHead, "alice"); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /auth/me: %d", resp.StatusCode)
	}
	if resp, _ := f.me(t, http.MethodGet, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /auth/me without a token: %d", resp.StatusCode)
	}

	m := f.members["bob"]
	for _, tc := range []struct {
		name, logged string
		id           *oauth.Identity
	}{
		{"project gone", "loading project for /auth/me", &oauth.Identity{ProjectID: "0190b3c2-7a1e-7c3d-9f00-00000000dead", MembershipID: m.ID}},
		{"membership gone", "loading membership for /auth/me", &oauth.Identity{ProjectID: f.project.ID, MembershipID: "0190b3c2-7a1e-7c3d-9f00-00000000beef"}},
	} {
		w := httptest.NewRecorder()
		f.h.Serve(w, httptest.NewRequest(http.MethodGet, "/auth/me", nil), tc.id, nil)
		if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), "loading the session failed") || strings.Contains(w.Body.String(), "not found") {
			t.Errorf("%s: %d %s", tc.name, w.Code, w.Body)
		}
		if n := f.logs.FilterMessage(tc.logged).FilterLevelExact(zapcore.ErrorLevel).Len(); n != 1 {
			t.Errorf("%s: %d log entries %q", tc.name, n, tc.logged)
		}
	}

	// Without a backend (none configured) the profile is the minimal one.
	w := httptest.NewRecorder()
	f.h.Serve(w, httptest.NewRequest(http.MethodGet, "/auth/me", nil),
		&oauth.Identity{ProjectID: f.project.ID, MembershipID: f.members["alice"].ID, Profile: "Practitioner/p1"}, nil)
	var me Me
	if err := json.Unmarshal(w.Body.Bytes(), &me); err != nil || w.Code != http.StatusOK || asJSON(me.Profile) != `{"id":"p1","resourceType":"Practitioner"}` {
		t.Errorf("without a backend: %d %s", w.Code, w.Body)
	}
}

package botapi

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

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/gateway/gatewaytest"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// apiFixture is the bot API behind a real gateway: a real Badger store,
// the in-process runner, real OAuth (token exchange against a loopback
// identity provider) and a loopback FHIR backend reached through a reverse
// proxy, as Caddy's reverse_proxy would. Requests go over HTTP to the
// gateway (serve) or straight to the API's handler as a given identity
// (call).
type apiFixture struct {
	st    *store.Store
	api   *API
	srv   *httptest.Server // the gateway
	logs  *observer.ObservedLogs
	admin *oauth.Identity // a project admin, for call

	project *store.Project
	// tokens of the project's admin (alice) and of a member who is not
	// an admin (bob), issued by token exchange.
	adminToken, memberToken string

	mu      sync.Mutex
	backend []backendRequest // what the FHIR backend received

	// A read of Patient/slow signals slowStarted, then waits for release
	// (or for its caller to go away) before answering.
	slowStarted chan struct{}
	release     chan struct{}
	releaseSlow func()
}

// backendRequest is a request as the FHIR backend saw it.
type backendRequest struct {
	Method, Path, Query, Body string
	Header                    http.Header
}

// newAPIFixture builds the fixture; o's Store, Runner and
// Logger are set by it, and its Compiler unless the test gives one.
func newAPIFixture(t *testing.T, o Options) *apiFixture {
	t.Helper()
	return newAPIFixtureOn(t, storetest.Open(t), o)
}

// newAPIFixtureOn builds the fixture on st.
func newAPIFixtureOn(t *testing.T, st *store.Store, o Options) *apiFixture {
	t.Helper()
	f := &apiFixture{st: st}

	idp := gatewaytest.IdentityProvider(t)
	f.slowStarted, f.release = make(chan struct{}, 16), make(chan struct{})
	fhirSrv := httptest.NewServer(http.HandlerFunc(f.serveBackend))
	t.Cleanup(fhirSrv.Close)
	var releaseOnce sync.Once
	f.releaseSlow = func() { releaseOnce.Do(func() { close(f.release) }) }
	t.Cleanup(f.releaseSlow) // before the backend closes, which waits for its requests

	f.project = &store.Project{Name: "clinic", Secret: []store.ProjectSetting{{Name: "API_KEY", ValueString: "project-key"}}}
	f.mustCreate(t, f.project)
	client := &store.ClientApplication{Name: "app", IdentityProvider: &store.IdentityProvider{UserInfoURL: idp.URL}}
	client.Meta.Project = f.project.ID
	f.mustCreate(t, client)
	for _, u := range []struct {
		name  string
		admin bool
	}{{"alice", true}, {"bob", false}} {
		user := &store.User{Email: u.name + "@example.com"}
		f.mustCreate(t, user)
		m := &store.ProjectMembership{
			Project: store.Reference{Reference: "Project/" + f.project.ID}, User: store.Reference{Reference: "User/" + user.ID},
			Profile: &store.Reference{Reference: "Practitioner/" + u.name}, Admin: u.admin,
		}
		m.Meta.Project = f.project.ID
		f.mustCreate(t, m)
	}
	auth := gatewaytest.OAuth(t, f.st)
	f.adminToken = gatewaytest.AccessToken(t, auth, client.ID, "alice")
	f.memberToken = gatewaytest.AccessToken(t, auth, client.ID, "bob")
	f.admin = &oauth.Identity{ProjectID: f.project.ID, Profile: "Practitioner/alice", Admin: true}

	core, logs := observer.New(zapcore.DebugLevel)
	f.logs = logs
	o.Store, o.Runner, o.Logger = f.st, botrunner.New(botrunner.Options{MaxConcurrent: 8}), zap.New(core)
	if o.Compiler == nil {
		o.Compiler = newCompiler(t)
	}
	// Runs without a request reach the backend through the gateway's
	// request-less route, dispatched through the same site.
	var site http.Handler
	var gw *gateway.Gateway
	if o.Backends == nil {
		o.Backends = func(ctx context.Context, id *oauth.Identity) (*gateway.Backend, error) { return gw.BackendFor(ctx, id) }
	}
	var err error
	f.api, err = New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.api.Shutdown) // before the store closes: cleanups run last first

	gw, err = gateway.New(gateway.Options{FHIRBase: "/fhir/R4", OAuth: auth, Operations: f.api.Handler, SiteOperations: f.api.SiteHandler,
		Dispatch: gatewaytest.Site(&site)})
	if err != nil {
		t.Fatal(err)
	}
	site = gatewaytest.Handler(t, gw, fhirSrv.URL)
	f.srv = httptest.NewServer(site)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *apiFixture) mustCreate(t *testing.T, r store.Resource) {
	t.Helper()
	if err := f.st.Create(context.Background(), r, store.PutOptions{}); err != nil {
		t.Fatalf("creating %T: %v", r, err)
	}
}

// serveBackend is the FHIR backend: it records each request and answers
// Patient/p1 with a patient (and Patient/slow when released), creates an Observation o1 on POST
// Observation, and answers everything else with 404.
func (f *apiFixture) serveBackend(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.backend = append(f.backend, backendRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(body), Header: r.Header.Clone()})
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/fhir+json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/fhir/R4/Observation":
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"resourceType":"Observation","id":"o1","status":"final"}`)
	case r.URL.Path == "/fhir/R4/Patient/slow":
		f.slowStarted <- struct{}{}
		select {
		case <-f.release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, `{"resourceType":"Patient","id":"slow","name":[{"family":"Slow"}]}`)
	case r.URL.Path == "/fhir/R4/Patient/p1":
		_, _ = io.WriteString(w, `{"resourceType":"Patient","id":"p1","name":[{"family":"Chalmers"}]}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"resourceType":"OperationOutcome","id":"not-found","issue":[{"severity":"error","code":"not-found","details":{"text":"Not found"}}]}`)
	}
}

func (f *apiFixture) backendRequests() []backendRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]backendRequest(nil), f.backend...)
}

// response is an answer, its body read.
type response struct {
	status int
	header http.Header
	body   string
}

// json decodes the body into a map, failing the test if it is not JSON.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %.300s", err, r.body)
	}
	return m
}

// serve sends a request through the gateway with a bearer token; header
// holds name, value pairs.
func (f *apiFixture) serve(t *testing.T, token, method, path, body string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// call sends a request straight to the API's handler as id, with no
// backend; header holds name, value pairs.
func (f *apiFixture) call(t *testing.T, id *oauth.Identity, method, path, body string, header ...string) response {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	op := f.api.Handler(targetOf(r))
	if op == nil {
		t.Fatalf("%s %s is not a bot operation", method, path)
	}
	w := httptest.NewRecorder()
	op(w, r, id, nil)
	return response{status: w.Code, header: w.Header(), body: w.Body.String()}
}

// deployBot stores a bot of the fixture's project and deploys its code
// with $deploy, as a project admin would.
func (f *apiFixture) deployBot(t *testing.T, bot *store.Bot, code string) *store.Bot {
	t.Helper()
	bot.Meta.Project = f.project.ID
	f.mustCreate(t, bot)
	body, _ := json.Marshal(map[string]string{"code": code, "filename": "index.js"})
	if r := f.call(t, f.admin, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$deploy", string(body)); r.status != http.StatusOK {
		t.Fatalf("deploying %s: %d %s", bot.Name, r.status, r.body)
	}
	return bot
}

// auditEventsOf returns the stored AuditEvents of a bot; call it after
// f.api.Shutdown, which writes those queued.
func (f *apiFixture) auditEventsOf(t *testing.T, botID string) []*store.AuditEvent {
	t.Helper()
	evs, err := store.Search[store.AuditEvent](context.Background(), f.st, store.Filter{Bot: botID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// outcomeText is the details text (or else the diagnostics) of an
// OperationOutcome body's first issue.
func outcomeText(t *testing.T, r response) string {
	t.Helper()
	m := r.json(t)
	if m["resourceType"] != "OperationOutcome" {
		t.Fatalf("not an OperationOutcome: %.300s", r.body)
	}
	issue := m["issue"].([]any)[0].(map[string]any)
	if d, ok := issue["details"].(map[string]any); ok {
		if s, _ := d["text"].(string); s != "" {
			return s
		}
	}
	s, _ := issue["diagnostics"].(string)
	return s
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/oauth"
)

// siteFixture is a gateway whose Dispatch serves its own site, with next
// standing in for reverse_proxy and recording what reaches it.
type siteFixture struct {
	*fixture
	reached []*http.Request
	bodies  []string
}

func newSiteFixture(t *testing.T, o Options) *siteFixture {
	t.Helper()
	sf := &siteFixture{}
	o.Dispatch = func(w http.ResponseWriter, r *http.Request) {
		_ = sf.gw.Serve(w, r, sf.next)
	}
	sf.fixture = newFixture(t, o)
	return sf
}

func (sf *siteFixture) next(w http.ResponseWriter, r *http.Request) error {
	b, _ := io.ReadAll(r.Body)
	sf.reached = append(sf.reached, r)
	sf.bodies = append(sf.bodies, string(b))
	w.Header().Set("Content-Type", "application/fhir+json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"resourceType":"Observation","id":"o1"}`))
	return nil
}

// TestBackendForCarriesCallsThroughTheSite: a request-less Backend's call
// goes through the site to the next handler with the identity's headers,
// the upstream credential and the tenant partition, exactly as a
// request's call does.
func TestBackendForCarriesCallsThroughTheSite(t *testing.T) {
	sf := newSiteFixture(t, Options{BackendTenant: TenantPath, UpstreamAuth: UpstreamBearer, UpstreamToken: "backend-secret"})
	be, err := sf.gw.BackendFor(context.Background(), &oauth.Identity{ProjectID: "p", Profile: "Bot/b1"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := be.Do(context.Background(), http.MethodPost, "Observation", nil, []byte(`{"resourceType":"Observation"}`),
		http.Header{"Content-Type": {"application/fhir+json"}, "X-Fhirgate-Profile": {"Practitioner/forged"}})
	if err != nil || resp.Status != http.StatusCreated || !strings.Contains(string(resp.Body), `"o1"`) {
		t.Fatalf("Do = %+v, %v", resp, err)
	}
	if len(sf.reached) != 1 {
		t.Fatalf("next ran %d times", len(sf.reached))
	}
	r := sf.reached[0]
	h := r.Header
	if r.Method != http.MethodPost || r.URL.EscapedPath() != "/fhir/R4/p/Observation" || sf.bodies[0] != `{"resourceType":"Observation"}` ||
		h.Get("X-Fhirgate-Profile") != "Bot/b1" || h.Get("X-Fhirgate-Project") != "p" || h.Get("X-Fhirgate-User") != "" ||
		h.Get("Authorization") != "Bearer backend-secret" {
		t.Errorf("next got %s %s %q with headers %v", r.Method, r.URL.EscapedPath(), sf.bodies[0], h)
	}
}

// TestBackendForAuthorizesAsItsIdentity: a request-less call beyond the
// identity's scopes is refused as the gate refuses it, before the site.
func TestBackendForAuthorizesAsItsIdentity(t *testing.T) {
	sf := newSiteFixture(t, Options{})
	be, err := sf.gw.BackendFor(context.Background(), &oauth.Identity{ProjectID: "p", Profile: "Patient/p1", Scope: "patient/*.rs"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := be.Do(context.Background(), http.MethodPost, "Observation", nil, []byte(`{"resourceType":"Observation","subject":{"reference":"Patient/p2"}}`), nil)
	if err != nil || resp.Status != http.StatusForbidden || !strings.Contains(string(resp.Body), "Observation.c") {
		t.Fatalf("Do = %+v, %v; want 403 naming Observation.c", resp, err)
	}
	if len(sf.reached) != 0 {
		t.Errorf("the refused call reached next")
	}
}

// TestBackendForRefusesAMisroutedCall: a carried call that the site routes
// to another gateway goes no further there, and the caller is told.
func TestBackendForRefusesAMisroutedCall(t *testing.T) {
	other := newSiteFixture(t, Options{})
	sf := newFixture(t, Options{Dispatch: func(w http.ResponseWriter, r *http.Request) { _ = other.gw.Serve(w, r, other.next) }})
	be, err := sf.gw.BackendFor(context.Background(), &oauth.Identity{ProjectID: "p", Profile: "Bot/b1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := be.Do(context.Background(), http.MethodGet, "Patient/1", nil, nil, nil); err == nil || !strings.Contains(err.Error(), "did not reach") {
		t.Fatalf("misrouted call: %v", err)
	}
	if len(other.reached) != 0 {
		t.Errorf("the other gateway sent the call on")
	}
	if _, err := newFixture(t, Options{}).gw.BackendFor(context.Background(), &oauth.Identity{ProjectID: "p"}); err == nil {
		t.Errorf("BackendFor without a Dispatch succeeded")
	}
}

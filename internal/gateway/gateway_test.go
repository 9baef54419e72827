package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
	"github.com/fhirgate/fhirgate/internal/tokens"
	"github.com/fhirgate/fhirgate/internal/userinfo"
)

// fixture is a gateway over a real OAuth server, store and loopback
// identity provider, with a recording "next" handler standing in for the
// backend.
type fixture struct {
	t       *testing.T
	gw      *Gateway
	token   string
	reached []*http.Request
}

func newFixture(t *testing.T, o Options) *fixture {
	t.Helper()
	st := storetest.Open(t)
	ctx := context.Background()
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"email":"alice@example.com","email_verified":true}`))
	}))
	t.Cleanup(idp.Close)
	proj := &store.Project{Name: "P"}
	proj.ID = "p"
	client := &store.ClientApplication{Name: "c", IdentityProvider: &store.IdentityProvider{UserInfoURL: idp.URL}}
	client.ID, client.Meta.Project = "c", "p"
	user := &store.User{Email: "alice@example.com"}
	user.ID = "u"
	m := &store.ProjectMembership{
		Project: store.Reference{Reference: "Project/p"}, User: store.Reference{Reference: "User/u"},
		Profile: &store.Reference{Reference: "Practitioner/1"},
	}
	m.ID = "m"
	for _, r := range []store.Resource{proj, client, user, m} {
		if _, err := st.Put(ctx, r, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := tokens.New(ctx, tokens.Options{Issuer: "https://gw.test", Keys: oauth.KeyStore{Store: st}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := oauth.New(oauth.Options{Store: st, Tokens: tok, UserInfo: userinfo.New(userinfo.Options{DefaultTimeout: time.Second})})
	if err != nil {
		t.Fatal(err)
	}
	o.OAuth = srv
	gw, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, gw: gw}

	form := url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "client_id": {"c"},
		"subject_token": {"idp-token"}, "subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}
	req := httptest.NewRequest("POST", "/oauth2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := f.serve(req)
	if rec.Code != 200 {
		t.Fatalf("exchange through the gateway: %d %s", rec.Code, rec.Body)
	}
	f.token = between(rec.Body.String(), `"access_token":"`, `"`)
	f.reached = nil
	return f
}

func between(s, start, end string) string {
	_, after, _ := strings.Cut(s, start)
	v, _, _ := strings.Cut(after, end)
	return v
}

func (f *fixture) serve(req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	err := f.gw.Serve(rec, req, func(w http.ResponseWriter, r *http.Request) error {
		f.reached = append(f.reached, r)
		w.WriteHeader(299)
		return nil
	})
	if err != nil {
		f.t.Fatalf("Serve returned %v", err)
	}
	return rec
}

func TestGatewayRouting(t *testing.T) {
	f := newFixture(t, Options{})
	tests := []struct {
		name, path, auth string
		spoof            bool
		status           int
		reaches          bool
	}{
		{name: "valid token", path: "/fhir/R4/Patient/1", auth: "token", status: 299, reaches: true},
		{name: "no token", path: "/fhir/R4/Patient/1", status: 401},
		{name: "bad token", path: "/fhir/R4/Patient/1", auth: "Bearer x.y.z", status: 401},
		{name: "public metadata", path: "/fhir/R4/metadata", status: 299, reaches: true},
		{name: "SMART discovery below the base is ours", path: "/fhir/R4/.well-known/smart-configuration", status: 200},
		{name: "SMART discovery at the root is ours", path: "/.well-known/smart-configuration", status: 200},
		{name: "public path is exact", path: "/fhir/R4/metadata/../Patient", status: 401},
		{name: "dot-dot into the base", path: "/public/../fhir/R4/Patient", status: 401},
		{name: "encoded slash into the base", path: "/fhir%2FR4%2FPatient", status: 401},
		{name: "servlet parameter", path: "/fhir;x=1/R4/Patient", status: 401},
		{name: "case variation", path: "/FHIR/r4/Patient", status: 401},
		{name: "outside the base", path: "/static/logo.png", status: 299, reaches: true},
		{name: "spoofed identity stripped", path: "/fhir/R4/Patient/1", auth: "token", spoof: true, status: 299, reaches: true},
		{name: "dotted path does not reach token endpoint", path: "/oauth2/../fhir/R4/Patient", status: 401},
		{name: "escaped dot-dot out of the base", path: "/fhir/R4/Bot/..%2f..%2fadmin", status: 401},
		{name: "escaped dot-dot out of a public path", path: "/fhir/R4/metadata%2f..%2fPatient", status: 401},
		{name: "literal dot-dot out of the base", path: "/fhir/R4/../../admin", status: 401},
		{name: "servlet dot-dot out of the base", path: "/fhir/R4/..;/..;/admin", status: 401},
		{name: "encoded slashes and dots out of the base", path: "/fhir/R4%2f..%2f..%2fadmin", status: 401},
		{name: "servlet dot-dot into a public path", path: "/fhir/R4/Patient/..;/metadata", status: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.reached = nil
			req := httptest.NewRequest("GET", "http://gw.test"+tt.path, nil)
			switch tt.auth {
			case "":
			case "token":
				req.Header.Set("Authorization", "Bearer "+f.token)
			default:
				req.Header.Set("Authorization", tt.auth)
			}
			if tt.spoof {
				req.Header.Set("X-Fhirgate-User", "admin")
				req.Header.Set("X-Fhirgate-Project", "other")
			}
			rec := f.serve(req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if got := len(f.reached) == 1; got != tt.reaches {
				t.Fatalf("reached next: %v, want %v", got, tt.reaches)
			}
			if !tt.reaches {
				return
			}
			r := f.reached[0]
			if r.Header.Get("Authorization") != "" {
				t.Fatal("the caller's Authorization reached the backend under upstream_auth strip")
			}
			if tt.auth == "token" {
				if r.Header.Get("X-Fhirgate-User") != "u" || r.Header.Get("X-Fhirgate-Project") != "p" ||
					r.Header.Get("X-Fhirgate-Profile") != "Practitioner/1" || r.Header.Get("X-Fhirgate-Client") != "c" {
					t.Fatalf("identity headers %v", r.Header)
				}
			} else if r.Header.Get("X-Fhirgate-User") != "" {
				t.Fatal("an unauthenticated request carried an identity header")
			}
		})
	}
}

func TestGatewayUpstreamAuthModes(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want func(tok string) string
	}{
		{"passthrough", Options{UpstreamAuth: UpstreamPassthrough}, func(tok string) string { return "Bearer " + tok }},
		{"bearer", Options{UpstreamAuth: UpstreamBearer, UpstreamToken: "backend-secret"}, func(string) string { return "Bearer backend-secret" }},
		{"custom header names", Options{Headers: IdentityHeaders{User: "X-User"}}, func(string) string { return "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.opts)
			req := httptest.NewRequest("GET", "/fhir/R4/Patient/1", nil)
			req.Header.Set("Authorization", "Bearer "+f.token)
			req.Header.Set("X-User", "spoofed")
			if rec := f.serve(req); rec.Code != 299 {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			r := f.reached[0]
			if got := r.Header.Get("Authorization"); got != tt.want(f.token) {
				t.Fatalf("Authorization %q", got)
			}
			if tt.opts.Headers.User != "" && r.Header.Get("X-User") != "u" {
				t.Fatalf("custom user header %q", r.Header.Get("X-User"))
			}
		})
	}
}

func TestGatewayOptionErrors(t *testing.T) {
	srv := &oauth.Server{}
	tests := []struct {
		name string
		o    Options
	}{
		{"no oauth", Options{}},
		{"relative base", Options{OAuth: srv, FHIRBase: "fhir"}},
		{"bad upstream mode", Options{OAuth: srv, UpstreamAuth: "maybe"}},
		{"bearer without token", Options{OAuth: srv, UpstreamAuth: UpstreamBearer}},
		{"relative public path", Options{OAuth: srv, PublicPaths: []string{"metadata"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.o); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/oauth"
)

func TestGatewayPublicPathsAreReadOnly(t *testing.T) {
	const secret = "backend-secret"
	base := Options{PublicPaths: []string{"/Questionnaire/*"}, UpstreamAuth: UpstreamBearer, UpstreamToken: secret}
	withAuth := base
	withAuth.PublicUpstreamAuth = true
	withPost := base
	withPost.PublicMethods = []string{"GET", "POST"}
	tests := []struct {
		name    string
		o       Options
		method  string
		token   bool
		status  int
		upAuth  string // Authorization the backend must see, when reached
		reaches bool
	}{
		{name: "anonymous GET", o: base, method: "GET", status: 299, reaches: true},
		{name: "anonymous HEAD", o: base, method: "HEAD", status: 299, reaches: true},
		{name: "anonymous OPTIONS", o: base, method: "OPTIONS", status: 299, reaches: true},
		{name: "anonymous PUT", o: base, method: "PUT", status: 401},
		{name: "anonymous PATCH", o: base, method: "PATCH", status: 401},
		{name: "anonymous DELETE", o: base, method: "DELETE", status: 401},
		{name: "anonymous POST", o: base, method: "POST", status: 401},
		{name: "lower-case get is not GET", o: base, method: "get", status: 401},
		{name: "PUT with a token", o: base, method: "PUT", token: true, status: 299, upAuth: "Bearer " + secret, reaches: true},
		{name: "anonymous GET with public_upstream_auth", o: withAuth, method: "GET", status: 299, upAuth: "Bearer " + secret, reaches: true},
		{name: "anonymous DELETE with public_upstream_auth", o: withAuth, method: "DELETE", status: 401},
		{name: "listed POST", o: withPost, method: "POST", status: 299, reaches: true},
		{name: "unlisted HEAD", o: withPost, method: "HEAD", status: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.o)
			req := httptest.NewRequest(tt.method, "http://gw.test/fhir/R4/Questionnaire/q1", nil)
			// An anonymous caller's own Authorization (not a fhirgate token)
			// must not reach the backend either.
			req.Header.Set("Authorization", "Basic Y2FsbGVyOnNlY3JldA==")
			if tt.token {
				req.Header.Set("Authorization", "Bearer "+f.token)
			}
			rec := f.serve(req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if got := len(f.reached) == 1; got != tt.reaches {
				t.Fatalf("reached next: %v, want %v", got, tt.reaches)
			}
			if tt.reaches {
				if got := f.reached[0].Header.Get("Authorization"); got != tt.upAuth {
					t.Fatalf("the backend got Authorization %q, want %q", got, tt.upAuth)
				}
			}
		})
	}
}

func TestGatewayRefusesBadPublicMethods(t *testing.T) {
	for _, m := range []string{"get", "", "GET POST", "G\x00T", "Get"} {
		if _, err := New(Options{OAuth: &oauth.Server{}, PublicMethods: []string{"HEAD", m}}); err == nil {
			t.Errorf("public method %q accepted", m)
		}
	}
	if _, err := New(Options{OAuth: &oauth.Server{}, PublicMethods: []string{"GET", "PROPFIND", "M-SEARCH"}}); err != nil {
		t.Errorf("valid methods refused: %v", err)
	}
}

func TestGatewayStripsOverrideHeaders(t *testing.T) {
	f := newFixture(t, Options{})
	spellings := []string{
		"X-Original-URL", "x-original-url", "X_Original_URL",
		"X-Rewrite-URL", "X_REWRITE_URL",
		"X-HTTP-Method-Override", "x_http_method_override",
		"X-HTTP-Method", "X-Method-Override", "X_Method_Override",
		// Identity headers under the underscore spelling a CGI backend
		// reads as the real one.
		"X_Fhirgate_User", "x_fhirgate_project",
	}
	for _, target := range []string{"/fhir/R4/Patient/1", "/fhir/R4/metadata", "/static/x"} {
		t.Run(target, func(t *testing.T) {
			f.reached = nil
			req := httptest.NewRequest("GET", "http://gw.test"+target, nil)
			req.Header.Set("Authorization", "Bearer "+f.token)
			for _, name := range spellings {
				// Set directly: Header.Set would canonicalise the underscore
				// spellings into one key, which is not what a client sends.
				req.Header[name] = []string{"DELETE"}
			}
			req.Header.Set("X-Kept", "1")
			if rec := f.serve(req); rec.Code != 299 {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			got := f.reached[0].Header
			for name, v := range got {
				for _, s := range spellings {
					// The gate's own identity headers carry the caller's identity, never the client's value.
					if sameHeaderName(name, s) && (v[0] == "DELETE" || name != http.CanonicalHeaderKey(name)) {
						t.Errorf("%s reached the backend: %v", name, v)
					}
				}
			}
			if got.Get("X-Kept") != "1" {
				t.Error("an ordinary header was removed")
			}
		})
	}
}

func TestGatewayRefusesMethodOverrideQuery(t *testing.T) {
	f := newFixture(t, Options{})
	tests := []struct {
		query  string
		refuse bool
	}{
		{"_method=DELETE", true},
		{"_id=1&_method=PUT", true},
		{"_METHOD=delete", true},
		{"%5Fmethod=DELETE", true},
		{"%255Fmethod=DELETE", true},
		{"%5f%6d%65%74%68%6f%64=DELETE", true},
		{"a=1;_method=DELETE", true},
		{".method=DELETE", true},
		{"+method=DELETE", true},
		{"_method", true},
		{"_methods=x", false},
		{"x=_method", false},
		{"method=DELETE", false},
		{"name=smith&_count=10", false},
	}
	for _, tt := range tests {
		for _, auth := range []bool{false, true} {
			target := "/fhir/R4/Patient?" + tt.query
			if !auth {
				target = "/fhir/R4/metadata?" + tt.query
			}
			t.Run(target, func(t *testing.T) {
				f.reached = nil
				req := httptest.NewRequest("GET", "http://gw.test"+target, nil)
				if auth {
					req.Header.Set("Authorization", "Bearer "+f.token)
				}
				rec := f.serve(req)
				if tt.refuse {
					if rec.Code != 400 || !strings.Contains(rec.Body.String(), "OperationOutcome") || len(f.reached) != 0 {
						t.Fatalf("status %d, reached %d: %s; want 400 OperationOutcome, not forwarded", rec.Code, len(f.reached), rec.Body)
					}
					return
				}
				if rec.Code != 299 {
					t.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			})
		}
	}
	// Outside the base the query is not the gate's business.
	f.reached = nil
	if rec := f.serve(httptest.NewRequest("GET", "http://gw.test/app/form?_method=DELETE", nil)); rec.Code != 299 {
		t.Fatalf("outside the base: %d", rec.Code)
	}
}

func TestBackendStripsOverridesFromOperationCalls(t *testing.T) {
	f := newFixture(t, Options{})
	var reached []*http.Request
	orig := httptest.NewRequest("POST", "http://gw.test/fhir/R4/Bot/b/$execute", nil)
	be := &Backend{g: f.gw, id: &oauth.Identity{UserID: "u", ProjectID: "p"}, orig: orig,
		next: func(w http.ResponseWriter, r *http.Request) error {
			reached = append(reached, r)
			w.WriteHeader(200)
			return nil
		}}
	h := http.Header{"X-Http-Method-Override": {"DELETE"}, "X_Original_URL": {"/admin"}, "X_Fhirgate_User": {"admin"}, "If-None-Exist": {"x=1"}}
	resp, err := be.Do(context.Background(), "GET", "Patient/1", nil, nil, h)
	if err != nil || resp.Status != 200 || len(reached) != 1 {
		t.Fatalf("Do: %v %+v, reached %d", err, resp, len(reached))
	}
	got := reached[0].Header
	if got.Get("X-Http-Method-Override") != "" || got["X_Original_URL"] != nil || got["X_Fhirgate_User"] != nil {
		t.Errorf("override or spoofed headers reached the backend: %v", got)
	}
	if got.Get("If-None-Exist") != "x=1" || got.Get("X-Fhirgate-User") != "u" {
		t.Errorf("wanted headers missing: %v", got)
	}

	reached = nil
	resp, err = be.Do(context.Background(), "GET", "Patient", url.Values{"_method": {"DELETE"}}, nil, nil)
	if err != nil || resp.Status != 400 || !strings.Contains(string(resp.Body), "OperationOutcome") || len(reached) != 0 {
		t.Fatalf("a _method query: %v %+v, reached %d; want a 400 OperationOutcome, not forwarded", err, resp, len(reached))
	}
}

func TestHeaderSetMatchesAnySpellingAndLength(t *testing.T) {
	long := "X-" + strings.Repeat("Long-", 20) + "User"
	s := newHeaderSet("X-Original-URL", long)
	h := http.Header{
		"X_original_url":                   {"1"},
		strings.ToLower(long):              {"1"},
		strings.ReplaceAll(long, "-", "_"): {"1"},
		"X-Original-Urls":                  {"kept"},
		"X-Original-Ur":                    {"kept"},
		"Y-Original-Url":                   {"kept"},
	}
	s.strip(h)
	if len(h) != 3 || h.Get("X-Original-Urls") != "kept" || h.Get("X-Original-Ur") != "kept" || h.Get("Y-Original-Url") != "kept" {
		t.Fatalf("left %v", h)
	}
}

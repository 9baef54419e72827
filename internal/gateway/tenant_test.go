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

// serveWith runs the gateway with next standing in for reverse_proxy.
func (f *fixture) serveWith(req *http.Request, next Next) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	if err := f.gw.Serve(rec, req, next); err != nil {
		f.t.Fatalf("Serve returned %v", err)
	}
	return rec
}

func TestTenantPathConfinesEveryRequestToItsPartition(t *testing.T) {
	f := newFixture(t, Options{BackendTenant: TenantPath})
	tests := []struct {
		name, target string
		want         string // escaped path the backend sees; "" = refused 400 before it
	}{
		{"read", "/fhir/R4/Patient/1", "/fhir/R4/p/Patient/1"},
		{"search keeps its query", "/fhir/R4/Patient?name=a%2Fb&_include=Patient:organization", "/fhir/R4/p/Patient"},
		{"the base (batch, transaction)", "/fhir/R4", "/fhir/R4/p"},
		{"the base with a slash", "/fhir/R4/", "/fhir/R4/p"},
		{"case of the base", "/FHIR/r4/Patient", "/fhir/R4/p/Patient"},
		{"double slashes", "/fhir/R4//Patient//1", "/fhir/R4/p/Patient/1"},
		{"operation", "/fhir/R4/Patient/1/$everything", "/fhir/R4/p/Patient/1/$everything"},
		{"encoded operation", "/fhir/R4/Patient/%24validate", "/fhir/R4/p/Patient/$validate"},
		{"another project's name is a segment of ours", "/fhir/R4/q/Patient/1", "/fhir/R4/p/q/Patient/1"},
		{"dot segments resolved inside the base", "/fhir/R4/x/../q/Patient", "/fhir/R4/p/q/Patient"},
		{"dot-dot through the base resolved first", "/fhir/R4/Patient/../../R4/q/Patient", "/fhir/R4/p/q/Patient"},
		{"absolute-form target", "http://other.test/fhir/R4/Patient/1", "/fhir/R4/p/Patient/1"},
		{"encoded slashes", "/fhir/R4/Patient/..%2f..%2fq%2fPatient", ""},
		{"encoded slash in a segment", "/fhir/R4/q%2FPatient", ""},
		{"encoded dot-dot out of the base", "/fhir/R4/%2e%2e/q/Patient", ""},
		{"double-encoded dot-dot", "/fhir/R4/%252e%252e/q/Patient", ""},
		{"servlet parameter", "/fhir/R4/Patient;x=1/1", ""},
		{"servlet dot-dot", "/fhir/R4/..;/q/Patient", ""},
		{"encoded servlet dot-dot", "/fhir/R4/..%3b/q/Patient", ""},
		{"backslashes", "/fhir/R4/Patient%5c..%5c..%5cq", ""},
		{"NUL", "/fhir/R4/Patient%00/1", ""},
		{"non-ASCII", "/fhir/R4/%EF%BC%8E%EF%BC%8E/q", ""},
		{"base only in a servlet reading", "/fhir/R4;x/Patient", ""},
		{"base only in a decoded reading", "/fhir%2FR4%2FPatient", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", tt.target, nil)
			req.Header.Set("Authorization", "Bearer "+f.token)
			req.Header.Set("Accept-Encoding", "gzip")
			var reached *http.Request
			rec := f.serveWith(req, func(w http.ResponseWriter, r *http.Request) error {
				reached = r
				w.WriteHeader(299)
				return nil
			})
			if tt.want == "" {
				if rec.Code != http.StatusBadRequest || reached != nil {
					t.Fatalf("status %d, reached backend: %v; want 400 before the backend", rec.Code, reached != nil)
				}
				if !strings.Contains(rec.Body.String(), "partition") {
					t.Fatalf("body %s does not say why", rec.Body)
				}
				return
			}
			if reached == nil {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			if got := reached.URL.EscapedPath(); got != tt.want {
				t.Fatalf("backend path %q, want %q", got, tt.want)
			}
			if reached.RequestURI != reached.URL.RequestURI() {
				t.Fatalf("RequestURI %q disagrees with the URL %q", reached.RequestURI, reached.URL.RequestURI())
			}
			wantQuery := ""
			if _, q, ok := strings.Cut(tt.target, "?"); ok {
				wantQuery = q
			}
			if reached.URL.RawQuery != wantQuery {
				t.Fatalf("query %q, want %q", reached.URL.RawQuery, wantQuery)
			}
			if reached.Header.Get("Accept-Encoding") != "" {
				t.Fatal("Accept-Encoding reached the backend: the response could not be rewritten")
			}
		})
	}

	// Public paths and paths outside the base carry no project.
	for _, p := range []string{"/fhir/R4/metadata", "/static/x.js"} {
		var reached *http.Request
		f.serveWith(httptest.NewRequest("GET", p, nil), func(w http.ResponseWriter, r *http.Request) error {
			reached = r
			return nil
		})
		if reached == nil || reached.URL.Path != p {
			t.Fatalf("unauthenticated %s reached %v", p, reached)
		}
	}
}

func TestTenantPathMapsThePartitionOutOfResponses(t *testing.T) {
	f := newFixture(t, Options{BackendTenant: TenantPath})
	body := `{"resourceType":"Bundle","link":[{"relation":"next","url":"http://backend:8080/fhir/R4/p?_getpages=abc"}],` +
		`"entry":[{"fullUrl":"http://backend:8080/fhir/R4/p/Patient/1","resource":{"resourceType":"Patient","id":"1",` +
		`"note":"see http://backend:8080/fhir/R4/p1/Patient/2 and /fhir/R4/p"}}]}`
	want := `{"resourceType":"Bundle","link":[{"relation":"next","url":"http://backend:8080/fhir/R4?_getpages=abc"}],` +
		`"entry":[{"fullUrl":"http://backend:8080/fhir/R4/Patient/1","resource":{"resourceType":"Patient","id":"1",` +
		`"note":"see http://backend:8080/fhir/R4/p1/Patient/2 and /fhir/R4"}}]}`
	for _, chunk := range []int{1, 3, 7, len(body)} {
		req := httptest.NewRequest("POST", "/fhir/R4/Patient", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+f.token)
		rec := f.serveWith(req, func(w http.ResponseWriter, r *http.Request) error {
			h := w.Header()
			h.Set("Content-Type", "application/fhir+json;charset=utf-8")
			h.Set("Content-Length", "999")
			h.Set("Location", "http://backend:8080/fhir/R4/p/Patient/1/_history/1")
			h.Set("Content-Location", "/fhir/R4/p/Patient/1/_history/1")
			h.Add("Link", `<http://backend:8080/fhir/R4/p/Patient?page=2>; rel="next"`)
			w.WriteHeader(http.StatusCreated)
			for b := body; b != ""; {
				n := min(chunk, len(b))
				if _, err := w.Write([]byte(b[:n])); err != nil {
					return err
				}
				b = b[n:]
			}
			return nil
		})
		if rec.Code != http.StatusCreated || rec.Body.String() != want {
			t.Fatalf("chunks of %d: %d\n got %s\nwant %s", chunk, rec.Code, rec.Body, want)
		}
		h := rec.Header()
		if h.Get("Location") != "http://backend:8080/fhir/R4/Patient/1/_history/1" ||
			h.Get("Content-Location") != "/fhir/R4/Patient/1/_history/1" ||
			h.Get("Link") != `<http://backend:8080/fhir/R4/Patient?page=2>; rel="next"` {
			t.Fatalf("headers not mapped: %v", h)
		}
		if h.Get("Content-Length") != "" {
			t.Fatal("a stale Content-Length was kept for a rewritten body")
		}
	}

	t.Run("binary and compressed bodies pass unchanged", func(t *testing.T) {
		for _, hdr := range []http.Header{
			{"Content-Type": {"application/octet-stream"}},
			{"Content-Type": {"application/fhir+json"}, "Content-Encoding": {"gzip"}},
		} {
			req := httptest.NewRequest("GET", "/fhir/R4/Binary/1", nil)
			req.Header.Set("Authorization", "Bearer "+f.token)
			raw := "/fhir/R4/p/Patient/1"
			rec := f.serveWith(req, func(w http.ResponseWriter, r *http.Request) error {
				for k, v := range hdr {
					w.Header()[k] = v
				}
				_, err := w.Write([]byte(raw))
				return err
			})
			if rec.Body.String() != raw {
				t.Fatalf("%v: body rewritten to %q", hdr, rec.Body)
			}
		}
	})
}

func TestTenantHeaderSendsTheProjectAndStripsClientCopies(t *testing.T) {
	f := newFixture(t, Options{BackendTenant: TenantHeader, TenantHeader: "X-Tenant-Id"})
	for _, tt := range []struct {
		name, path string
		auth       bool
		want       string
	}{
		{"authenticated", "/fhir/R4/Patient/1", true, "p"},
		{"public", "/fhir/R4/metadata", false, ""},
		{"outside the base", "/static/x.js", false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", tt.path, nil)
			if tt.auth {
				req.Header.Set("Authorization", "Bearer "+f.token)
			}
			req.Header.Set("X-Tenant-Id", "q")
			req.Header["X_tenant_id"] = []string{"q"}
			var reached *http.Request
			f.serveWith(req, func(w http.ResponseWriter, r *http.Request) error {
				reached = r
				return nil
			})
			if reached == nil {
				t.Fatal("did not reach the backend")
			}
			if got := reached.Header.Values("X-Tenant-Id"); strings.Join(got, ",") != tt.want {
				t.Fatalf("X-Tenant-Id %q, want %q", got, tt.want)
			}
			if reached.Header["X_tenant_id"] != nil {
				t.Fatal("an underscore spelling of the tenant header reached the backend")
			}
			if reached.URL.Path != tt.path {
				t.Fatalf("path rewritten to %q in header mode", reached.URL.Path)
			}
		})
	}
}

func TestTenantAppliesToOperationsBackendCalls(t *testing.T) {
	for _, tt := range []struct {
		name           string
		o              Options
		path, wantPath string
		wantHeader     string
	}{
		{"path (X-Tenant is no header of ours)", Options{BackendTenant: TenantPath}, "Patient/1", "/fhir/R4/p/Patient/1", "q"},
		{"path refuses an escape", Options{BackendTenant: TenantPath}, "Patient/..%2F..%2Fq", "", ""},
		{"header", Options{BackendTenant: TenantHeader, TenantHeader: "X-Tenant"}, "Patient/1", "/fhir/R4/Patient/1", "p"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var resp *BackendResponse
			tt.o.Operations = func(t Target) Operation {
				if t.Type != "Bot" {
					return nil
				}
				return func(w http.ResponseWriter, r *http.Request, _ *oauth.Identity, be *Backend) {
					var err error
					resp, err = be.Do(context.WithoutCancel(r.Context()), "GET", tt.path, url.Values{"x": {"1"}}, nil, http.Header{"X-Tenant": {"q"}})
					if err != nil {
						panic(err)
					}
				}
			}
			f := newFixture(t, tt.o)
			req := httptest.NewRequest("POST", "/fhir/R4/Bot/b/$execute", nil)
			req.Header.Set("Authorization", "Bearer "+f.token)
			var reached *http.Request
			f.serveWith(req, func(w http.ResponseWriter, r *http.Request) error {
				reached = r
				w.Header().Set("Content-Type", "application/fhir+json")
				w.Header().Set("Location", "/fhir/R4/p/Patient/1")
				_, err := w.Write([]byte(`{"id":"/fhir/R4/p"}`))
				return err
			})
			if tt.wantPath == "" {
				if reached != nil || resp == nil || resp.Status != http.StatusBadRequest {
					t.Fatalf("escape reached the backend (%v) or was not answered 400 (%+v)", reached != nil, resp)
				}
				return
			}
			if reached == nil || resp == nil {
				t.Fatal("the backend call did not happen")
			}
			if reached.URL.EscapedPath() != tt.wantPath || reached.URL.RawQuery != "x=1" {
				t.Fatalf("backend call reached %q ? %q", reached.URL.EscapedPath(), reached.URL.RawQuery)
			}
			if got := reached.Header.Get("X-Tenant"); got != tt.wantHeader {
				t.Fatalf("X-Tenant %q, want %q", got, tt.wantHeader)
			}
			if tt.o.BackendTenant == TenantPath &&
				(string(resp.Body) != `{"id":"/fhir/R4"}` || resp.Header.Get("Location") != "/fhir/R4/Patient/1") {
				t.Fatalf("response not mapped: %s %v", resp.Body, resp.Header)
			}
		})
	}
}

func TestTenantOptionErrors(t *testing.T) {
	srv := &oauth.Server{}
	for _, o := range []Options{
		{OAuth: srv, BackendTenant: "partition"},
		{OAuth: srv, BackendTenant: TenantHeader},
		{OAuth: srv, BackendTenant: TenantHeader, TenantHeader: "Bad Header"},
		{OAuth: srv, BackendTenant: TenantPath, TenantHeader: "X-Tenant"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestPartitionPathRefusesProjectsThatAreNotOneSegment(t *testing.T) {
	for _, p := range []string{"", ".", "..", "a/b", `a\b`, "a;b", "a%2Fb", "a b"} {
		if got, err := partitionPath("/fhir/R4", p, []string{"Patient"}); err == nil {
			t.Errorf("project %q accepted: %q", p, got)
		}
	}
}

// FuzzPartitionPath: whatever the request path, a path the gate sends on
// is in the project's partition on every reading a backend may make of it.
func FuzzPartitionPath(f *testing.F) {
	for _, s := range []string{
		"/fhir/R4/Patient/1", "/fhir/R4", "/fhir/R4/..%2f..%2fq", "/fhir/R4/%2e%2e/q", "/fhir/R4/%252e%252e/q",
		"/fhir/R4/..;/q", "/fhir/R4/a%5c..%5c..%5cq", "//fhir//R4//x", "/FHIR/r4/./x/../../q",
		"/fhir/R4/%2E%2e%2fq", "/fhir/R4/.%2e/.%2E/q", "/fhir/R4/%25%32%65%25%32%65/q",
	} {
		f.Add(s, "p")
	}
	f.Add("/fhir/R4/x", "..")
	f.Add("/fhir/R4/x", "a%2e")
	f.Fuzz(func(t *testing.T, target, project string) {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		tgt := ParseTarget("/fhir/R4", u)
		if !tgt.Under {
			return
		}
		got, err := partitionPath(tgt.Base, project, tgt.Segments)
		if err != nil {
			return
		}
		prefix := "/fhir/R4/" + url.PathEscape(project)
		if got != prefix && !strings.HasPrefix(got, prefix+"/") {
			t.Fatalf("%q (project %q) -> %q, outside %q", target, project, got, prefix)
		}
		decoded := decodePath(got)
		for seg := range strings.SplitSeq(strings.ReplaceAll(decoded, `\`, "/"), "/") {
			seg, _, _ = strings.Cut(seg, ";")
			if seg == "." || seg == ".." {
				t.Fatalf("%q (project %q) -> %q: dot segment after decoding (%q)", target, project, got, decoded)
			}
		}
		if want := strings.ToLower("/fhir/R4/" + project); !under(cleanPath(decoded), want) {
			t.Fatalf("%q (project %q) -> %q reads as %q, outside %q", target, project, got, cleanPath(decoded), want)
		}
	})
}

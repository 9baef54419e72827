package caddymodule

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/egress"
	"github.com/fhirgate/fhirgate/internal/store"
)

// TestDeclaredEgressReachesTheProjectsClient loads a project whose egress
// block allows one loopback server: the project's client reaches it and
// not another, a project without a block reaches nothing, and a malformed
// entry refuses the load naming the project and the entry.
func TestDeclaredEgressReachesTheProjectsClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hi") }))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer other.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	_, err := loadApp(t, t.TempDir(), map[string]*ProjectConfig{"p": {Egress: &EgressConfig{Allow: []string{"exa mple.com"}}}}, false)
	if err == nil || !strings.Contains(err.Error(), "project p") || !strings.Contains(err.Error(), "allow 'exa mple.com'") {
		t.Fatalf("malformed entry: %v", err)
	}

	a, err := loadApp(t, t.TempDir(), map[string]*ProjectConfig{
		"p":    {Egress: &EgressConfig{AllowHTTP: []string{host}}},
		"none": {},
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	p, err := store.Get[store.Project](t.Context(), a.Store(), "p")
	if err != nil || p.Egress == nil || len(p.Egress.AllowHTTP) != 1 {
		t.Fatalf("stored project %+v, %v", p, err)
	}
	c, err := a.Egress().For("p")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hi" {
		t.Fatalf("body %q", b)
	}
	var re *egress.RefusedError
	if _, err := c.Get(other.URL); !errors.As(err, &re) {
		t.Fatalf("host not listed: %v", err)
	}
	none, err := a.Egress().For("none")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.Get(srv.URL); !errors.As(err, &re) {
		t.Fatalf("project without egress: %v", err)
	}
}

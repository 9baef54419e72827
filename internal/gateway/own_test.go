package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestOwnTokenKeptFromPathsOutsideTheBase: every reading of a path
// outside fhir_base loses a fhirgate token unless all its readings are a
// passthrough path; /oauth2/ paths are never handed on.
func TestOwnTokenKeptFromPathsOutsideTheBase(t *testing.T) {
	f := newFixture(t, Options{TokenPassthrough: []string{"/Verified/*", "/exact"}})
	tests := []struct {
		name, path string
		status     int
		reaches    bool
		keeps      bool
	}{
		{"outside the base", "/portal/index.html", 299, true, false},
		{"app callback", "/auth/callback?code=x", 299, true, false},
		{"passthrough subtree", "/verified/a/b", 299, true, true},
		{"passthrough root of the subtree", "/verified", 299, true, true},
		{"passthrough in another case", "/VERIFIED/a", 299, true, true},
		{"passthrough exact", "/exact", 299, true, true},
		{"below an exact entry", "/exact/more", 299, true, false},
		{"dot-dot out of the passthrough", "/verified/../portal", 299, true, false},
		{"encoded dot-dot out of the passthrough", "/verified/..%2fportal", 299, true, false},
		{"unknown /oauth2 path", "/oauth2/authorize", 404, false, false},
		{"/oauth2 itself", "/oauth2", 404, false, false},
		{"encoded /oauth2", "/%6Fauth2/authorize", 404, false, false},
		{"dot-dot into /oauth2", "/x/../oauth2/userinfo", 404, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.reached = nil
			req := httptest.NewRequest("GET", "http://gw.test"+tt.path, nil)
			req.Header.Set("Authorization", "Bearer "+f.token)
			rec := f.serve(req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if got := len(f.reached) == 1; got != tt.reaches {
				t.Fatalf("reached next: %v, want %v", got, tt.reaches)
			}
			if tt.status == 404 && !strings.Contains(rec.Body.String(), "OperationOutcome") {
				t.Fatalf("not fhirgate's 404: %s", rec.Body)
			}
			if tt.reaches {
				if got := f.reached[0].Header.Get("Authorization") != ""; got != tt.keeps {
					t.Fatalf("the token reached the next handler: %v, want %v", got, tt.keeps)
				}
			}
		})
	}
	// Another issuer's token is not ours to remove.
	f.reached = nil
	req := httptest.NewRequest("GET", "http://gw.test/portal", nil)
	foreign := "Bearer eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJodHRwczovL2lkcC5leGFtcGxlIn0.c2ln"
	req.Header.Set("Authorization", foreign)
	f.serve(req)
	if len(f.reached) != 1 || f.reached[0].Header.Get("Authorization") != foreign {
		t.Fatal("a foreign token was removed or the request not handed on")
	}
}

// TestBasicOnlyWhereEnabled: a client's Basic credentials are refused by
// a gate without basic_auth, before any check of the secret.
func TestBasicOnlyWhereEnabled(t *testing.T) {
	f := newFixture(t, Options{})
	req := httptest.NewRequest("GET", "http://gw.test/fhir/R4/Patient/1", nil)
	req.SetBasicAuth("web", "whatever")
	rec := f.serve(req)
	if rec.Code != 401 || len(f.reached) != 0 || !strings.Contains(rec.Header().Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("Basic on a gate without basic_auth: %d %v", rec.Code, rec.Header())
	}
}

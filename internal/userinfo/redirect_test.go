package userinfo

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestRedirectWithinTheSameOriginIsFollowed(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/userinfo":
			http.Redirect(w, r, "/v2/userinfo", http.StatusFound)
		case "/v2/userinfo":
			jsonHandler(`{"sub":"moved"}`)(w, r)
		}
	})
	c := New(Options{})
	info, err := c.Lookup(context.Background(), LookupRequest{URL: p.URL + "/userinfo", Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	if info.Sub != "moved" || p.calls.Load() != 2 {
		t.Fatalf("sub %q after %d calls", info.Sub, p.calls.Load())
	}
	if got := p.headers(1).Get("Authorization"); got != "Bearer "+testToken {
		t.Fatalf("redirected request carried Authorization %q", got)
	}
}

func TestRedirectToAnotherHostIsRefused(t *testing.T) {
	other := newProvider(t, jsonHandler(`{"sub":"attacker"}`))
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	})
	c := New(Options{})
	_, err := c.Lookup(context.Background(), LookupRequest{URL: p.URL, Token: testToken})
	wantKind(t, err, KindUnavailable)
	if !strings.Contains(err.Error(), "redirect to another host refused") {
		t.Fatalf("error %q does not say why", err)
	}
	if n := other.calls.Load(); n != 0 {
		t.Fatalf("the other host was called %d times", n)
	}
}

func TestRedirectLoopStopsAfterThree(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/again", http.StatusFound)
	})
	c := New(Options{})
	_, err := c.Lookup(context.Background(), LookupRequest{URL: p.URL, Token: testToken})
	wantKind(t, err, KindUnavailable)
	if n := p.calls.Load(); n != 1+maxRedirects {
		t.Fatalf("%d requests, want %d", n, 1+maxRedirects)
	}
}

// A caller's own http.Client cannot loosen the redirect rule.
func TestCallerHTTPClientKeepsTheRedirectRule(t *testing.T) {
	other := newProvider(t, jsonHandler(`{"sub":"attacker"}`))
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL, http.StatusFound)
	})
	permissive := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}
	c := New(Options{HTTPClient: permissive})
	_, err := c.Lookup(context.Background(), LookupRequest{URL: p.URL, Token: testToken})
	wantKind(t, err, KindUnavailable)
	if other.calls.Load() != 0 {
		t.Fatal("the other host was called")
	}
	if permissive.CheckRedirect(nil, nil) != nil {
		t.Fatal("the caller's client was modified")
	}
}

func TestOrigin(t *testing.T) {
	cases := []struct {
		a, b string
		same bool
	}{
		{"http://idp.test/a", "http://idp.test:80/b", true},
		{"https://IDP.test/a", "https://idp.test:443/b", true},
		{"https://[::1]:8443/a", "https://[::1]:8443/b", true},
		{"https://idp.test/a", "http://idp.test/a", false},
		{"https://idp.test/a", "https://idp.test:8443/a", false},
		{"https://idp.test/a", "https://evil.idp.test/a", false},
		{"https://idp.test/a", "https://idp.test.evil/a", false},
	}
	for _, tc := range cases {
		t.Run(tc.a+" "+tc.b, func(t *testing.T) {
			a, err := url.Parse(tc.a)
			if err != nil {
				t.Fatal(err)
			}
			b, err := url.Parse(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if got := sameOrigin(a, b); got != tc.same {
				t.Fatalf("sameOrigin = %v", got)
			}
		})
	}
}

// Package gatewaytest builds, for the tests of the services behind the gate (botapi, session),
// what stands around them in production: a loopback identity provider, the real OAuth server
// on a store, and the real gateway serving over HTTP in front of a loopback FHIR backend
// reached through a reverse proxy, as Caddy's reverse_proxy would.
package gatewaytest

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
	"github.com/fhirgate/fhirgate/internal/userinfo"
)

// IdentityProvider is a loopback userinfo endpoint that vouches for name@example.com when it
// is shown the subject token "idp-<name>" (see SubjectToken).
func IdentityProvider(tb testing.TB) *httptest.Server {
	tb.Helper()
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		email := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer idp-") + "@example.com"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"email": email, "email_verified": true})
	}))
	tb.Cleanup(idp.Close)
	return idp
}

// SubjectToken is the identity provider's token for name@example.com.
func SubjectToken(name string) string { return "idp-" + name }

// OAuth is the real token service and OAuth server on st.
func OAuth(tb testing.TB, st *store.Store) *oauth.Server {
	tb.Helper()
	keys := oauth.KeyStore{Store: st}
	tok, err := tokens.New(context.Background(), tokens.Options{Issuer: "https://gw.test", Keys: keys, KeysChanged: keys.Changes})
	if err != nil {
		tb.Fatal(err)
	}
	auth, err := oauth.New(oauth.Options{Store: st, Tokens: tok, UserInfo: userinfo.New(userinfo.Options{DefaultTimeout: 5 * time.Second})})
	if err != nil {
		tb.Fatal(err)
	}
	return auth
}

// AccessToken exchanges the identity provider's token for name (IdentityProvider) through
// clientID and returns fhirgate's access token.
func AccessToken(tb testing.TB, auth *oauth.Server, clientID, name string) string {
	tb.Helper()
	resp, _, e := auth.Exchange(context.Background(), oauth.ExchangeRequest{ClientID: clientID, SubjectToken: SubjectToken(name)})
	if e != nil {
		tb.Fatalf("token exchange for %s: %v", name, e)
	}
	return resp.AccessToken
}

// Serve serves gw over HTTP, sending what it lets through to backend through a reverse proxy.
func Serve(tb testing.TB, gw *gateway.Gateway, backend string) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(Handler(tb, gw, backend))
	tb.Cleanup(srv.Close)
	return srv
}

// Handler is the site Serve serves: gw, then a reverse proxy to backend. A test that gives the
// gateway a Dispatch (for request-less backends) sends its requests here, as Caddy sends them
// through the site's server.
func Handler(tb testing.TB, gw *gateway.Gateway, backend string) http.Handler {
	tb.Helper()
	target, err := url.Parse(backend)
	if err != nil {
		tb.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, ErrorLog: log.New(io.Discard, "", 0)}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = gw.Serve(w, r, func(w http.ResponseWriter, r *http.Request) error {
			proxy.ServeHTTP(w, r)
			return nil
		})
	})
}

// Site is a Dispatch for a gateway that Handler serves: set *site once the handler exists.
func Site(site *http.Handler) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) { (*site).ServeHTTP(w, r) }
}

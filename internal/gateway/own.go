package gateway

import (
	"net/http"
	"strings"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/oauth"
)

// oauthPrefix is fhirgate's: every path below it is answered here, an
// unknown one with 404, and never proxied, so a request meant for an
// authorization server never carries a fhirgate token to the site.
const oauthPrefix = "/oauth2"

// serveOAuth answers a request under /oauth2/. Any reading of the path
// below /oauth2 lands here; only the exact paths are endpoints.
func (g *Gateway) serveOAuth(w http.ResponseWriter, r *http.Request) {
	o := g.o.OAuth
	switch r.URL.Path {
	case "/oauth2/token":
		o.ServeToken(w, r)
	case "/oauth2/revoke":
		o.ServeRevoke(w, r)
	case "/oauth2/introspect":
		o.ServeIntrospect(w, r)
	case "/oauth2/logout":
		g.authenticated(w, r, o.ServeLogout)
	case "/oauth2/userinfo":
		g.authenticated(w, r, o.ServeUserinfo)
	default:
		fhir.WriteOutcome(w, http.StatusNotFound,
			"not found: fhirgate answers /oauth2/token, /oauth2/revoke, /oauth2/introspect, /oauth2/logout and /oauth2/userinfo")
	}
}

// authenticated runs serve for an authenticated caller, or answers 401.
func (g *Gateway) authenticated(w http.ResponseWriter, r *http.Request, serve func(http.ResponseWriter, *http.Request, *oauth.Identity)) {
	id, aerr := g.authenticate(r)
	if aerr != nil {
		oauth.WriteAuthError(w, aerr)
		return
	}
	serve(w, r, id)
}

// authenticate checks the request's bearer token or, where basic_auth is
// on, its Basic client credentials.
func (g *Gateway) authenticate(r *http.Request) (*oauth.Identity, *oauth.AuthError) {
	if g.o.BasicAuth && oauth.IsBasic(r) {
		return g.o.OAuth.AuthenticateBasic(r.Context(), r)
	}
	return g.o.OAuth.Authenticate(r.Context(), r)
}

// keepTokenHome removes a fhirgate token from a request that leaves the
// gate outside the FHIR base, unless the operator listed its path as a
// service that verifies fhirgate tokens itself. Only our own tokens are
// removed: a site's own credentials (another issuer's token, a cookie, its
// own Basic realm) pass untouched.
func (g *Gateway) keepTokenHome(r *http.Request, views []string) {
	if len(r.Header.Values("Authorization")) == 0 || g.allPassthrough(views) {
		return
	}
	if g.o.OAuth.CarriesOwnToken(r) {
		r.Header.Del("Authorization")
	}
}

// allPassthrough tells whether every reading of the path is a listed
// passthrough path.
func (g *Gateway) allPassthrough(views []string) bool {
	if len(g.passthrough) == 0 {
		return false
	}
	for _, v := range views {
		if !matchesAny(v, g.passthrough) {
			return false
		}
	}
	return true
}

// matchesAny tells whether the normalised path p is one of paths (exact,
// or below a "/*" entry). Public paths and passthrough paths are matched
// alike.
func matchesAny(p string, paths []string) bool {
	for _, q := range paths {
		if prefix, ok := strings.CutSuffix(q, "/*"); ok {
			if under(p, prefix) {
				return true
			}
		} else if p == q {
			return true
		}
	}
	return false
}

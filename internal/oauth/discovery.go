package oauth

import (
	"encoding/json"
	"net/http"
	"strings"
)

// endpoints are what both discovery documents (RFC 8414 / OpenID Connect
// and SMART's) say of the token endpoint.
type endpoints struct {
	Issuer                            string   `json:"issuer"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	UserinfoEndpoint                  string   `json:"userinfo_endpoint"`
	JWKSURI                           string   `json:"jwks_uri"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	IntrospectionEndpoint             string   `json:"introspection_endpoint"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	ScopesSupported                   []string `json:"scopes_supported"`
}

// metadata is the RFC 8414 / OpenID Connect Discovery document.
type metadata struct {
	endpoints
	SubjectTypesSupported            []string `json:"subject_types_supported"`
	IDTokenSigningAlgValuesSupported []string `json:"id_token_signing_alg_values_supported"`
	ClaimsSupported                  []string `json:"claims_supported"`
}

// ServeMetadata answers /.well-known/openid-configuration and
// /.well-known/oauth-authorization-server with the same document. fhirgate
// has no authorization endpoint (it only exchanges tokens), so it lists no
// response types.
func (s *Server) ServeMetadata(w http.ResponseWriter, r *http.Request) {
	s.serveDiscovery(w, r, func(e endpoints) any {
		return metadata{
			endpoints:                        e,
			SubjectTypesSupported:            []string{"public"},
			IDTokenSigningAlgValuesSupported: []string{"ES256"},
			ClaimsSupported:                  []string{"iss", "sub", "aud", "exp", "iat", "client_id", "login_id", "profile", "fhirUser", "email", "patient"},
		}
	})
}

// serveDiscovery answers a GET or HEAD with the cacheable discovery
// document doc builds around this server's endpoints.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request, doc func(endpoints) any) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, oauthErr(http.StatusMethodNotAllowed, errInvalidRequest, "method", "use GET"))
		return
	}
	base := strings.TrimSuffix(s.o.Tokens.Issuer(), "/")
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeMetadata(w, doc(endpoints{
		Issuer:                            s.o.Tokens.Issuer(),
		TokenEndpoint:                     base + "/oauth2/token",
		UserinfoEndpoint:                  base + "/oauth2/userinfo",
		JWKSURI:                           base + "/.well-known/jwks.json",
		RevocationEndpoint:                base + "/oauth2/revoke",
		IntrospectionEndpoint:             base + "/oauth2/introspect",
		GrantTypesSupported:               grantTypesSupported,
		ResponseTypesSupported:            []string{},
		TokenEndpointAuthMethodsSupported: authMethodsSupported,
		ScopesSupported:                   scopesSupported,
	}))
}

// ServeJWKS answers /.well-known/jwks.json with the public signing keys,
// including recently retired ones that still verify. Verifiers should
// re-fetch when they meet an unknown kid; the short max-age keeps a rotation
// visible within a minute either way.
func (s *Server) ServeJWKS(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, oauthErr(http.StatusMethodNotAllowed, errInvalidRequest, "method", "use GET"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=60")
	_, _ = w.Write(s.o.Tokens.JWKS())
}

// writeMetadata sends a cacheable JSON document (writeJSON forbids caching).
func writeMetadata(w http.ResponseWriter, m any) {
	body, _ := json.Marshal(m) // only strings and string slices: cannot fail
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

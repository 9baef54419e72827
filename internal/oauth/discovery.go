package oauth

import (
	"encoding/json"
	"net/http"
	"strings"
)

// metadata is the RFC 8414 / OpenID Connect Discovery document.
type metadata struct {
	Issuer                            string   `json:"issuer"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	UserinfoEndpoint                  string   `json:"userinfo_endpoint"`
	JWKSURI                           string   `json:"jwks_uri"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	IntrospectionEndpoint             string   `json:"introspection_endpoint"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	SubjectTypesSupported             []string `json:"subject_types_supported"`
	IDTokenSigningAlgValuesSupported  []string `json:"id_token_signing_alg_values_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	ScopesSupported                   []string `json:"scopes_supported"`
	ClaimsSupported                   []string `json:"claims_supported"`
}

// ServeMetadata answers /.well-known/openid-configuration and
// /.well-known/oauth-authorization-server with the same document. fhirgate
// has no authorization endpoint (it only exchanges tokens), so it lists no
// response types.
func (s *Server) ServeMetadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, oauthErr(http.StatusMethodNotAllowed, errInvalidRequest, "method", "use GET"))
		return
	}
	base := strings.TrimSuffix(s.o.Tokens.Issuer(), "/")
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeMetadata(w, metadata{
		Issuer:                            s.o.Tokens.Issuer(),
		TokenEndpoint:                     base + "/oauth2/token",
		UserinfoEndpoint:                  base + "/oauth2/userinfo",
		JWKSURI:                           base + "/.well-known/jwks.json",
		RevocationEndpoint:                base + "/oauth2/revoke",
		IntrospectionEndpoint:             base + "/oauth2/introspect",
		GrantTypesSupported:               []string{grantTokenExchange, grantRefreshToken, grantClientCredentials},
		ResponseTypesSupported:            []string{},
		SubjectTypesSupported:             []string{"public"},
		IDTokenSigningAlgValuesSupported:  []string{"ES256"},
		TokenEndpointAuthMethodsSupported: []string{"none", "client_secret_basic", "client_secret_post", "private_key_jwt"},
		ScopesSupported:                   []string{"openid", "offline", "offline_access", "email"},
		ClaimsSupported:                   []string{"iss", "sub", "aud", "exp", "iat", "client_id", "login_id", "profile", "fhirUser", "email"},
	})
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
func writeMetadata(w http.ResponseWriter, m metadata) {
	body, _ := json.Marshal(m) // only strings and string slices: cannot fail
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

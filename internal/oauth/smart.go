package oauth

import "net/http"

// What the token endpoint supports, shared by both discovery documents.
var (
	grantTypesSupported  = []string{grantTokenExchange, grantRefreshToken, grantClientCredentials}
	authMethodsSupported = []string{"none", "client_secret_basic", "client_secret_post", "private_key_jwt"}
	// scopesSupported are the scopes a token request may carry and that
	// do something here: SMART v2 resource scopes (and their v1 spellings,
	// patient/*.read and the like, with the same meaning), the OpenID
	// ones, refresh tokens and the patient context.
	scopesSupported = []string{
		"openid", "fhirUser", "email", "offline_access", "offline", "launch/patient",
		"patient/*.cruds", "user/*.cruds", "system/*.cruds",
		"patient/*.rs", "user/*.rs", "system/*.rs",
	}
	// smartCapabilities are the SMART App Launch 2.x capabilities fhirgate
	// has. It has no authorization endpoint (it exchanges the tokens of
	// an identity provider the app already signed in with), so no launch,
	// PKCE or SSO capability is claimed.
	smartCapabilities = []string{
		"client-public", "client-confidential-symmetric", "client-confidential-asymmetric",
		"permission-offline", "permission-patient", "permission-user",
		"permission-v1", "permission-v2",
	}
)

// smartConfiguration is the SMART App Launch 2.x discovery document
// (.well-known/smart-configuration).
type smartConfiguration struct {
	endpoints
	Capabilities []string `json:"capabilities"`
}

// ServeSMARTConfiguration answers .well-known/smart-configuration (at the
// site root and below the FHIR base, where SMART apps look) without a
// token.
func (s *Server) ServeSMARTConfiguration(w http.ResponseWriter, r *http.Request) {
	s.serveDiscovery(w, r, func(e endpoints) any {
		return smartConfiguration{endpoints: e, Capabilities: smartCapabilities}
	})
}

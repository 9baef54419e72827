package oauth

import (
	"net/http"

	"github.com/fhirgate/fhirgate/internal/tokens"
)

// introspection is an RFC 7662 response.
type introspection struct {
	Active    bool   `json:"active"`
	Scope     string `json:"scope,omitempty"`
	ClientID  string `json:"client_id,omitempty"`
	Username  string `json:"username,omitempty"`
	TokenType string `json:"token_type,omitempty"`
	Exp       int64  `json:"exp,omitempty"`
	Iat       int64  `json:"iat,omitempty"`
	Nbf       int64  `json:"nbf,omitempty"`
	Sub       string `json:"sub,omitempty"`
	Aud       string `json:"aud,omitempty"`
	Iss       string `json:"iss,omitempty"`
	Jti       string `json:"jti,omitempty"`
	LoginID   string `json:"login_id,omitempty"`
	Profile   string `json:"profile,omitempty"`
	// Patient is the token's patient context, as in the token response.
	Patient string `json:"patient,omitempty"`
}

// ServeIntrospect is POST /oauth2/introspect (RFC 7662). The caller must
// name itself as a client (HTTP Basic or client_id, with the secret when the
// client has one), and only learns about tokens issued to that client: a
// token of another audience is reported inactive. A revoked, expired or
// otherwise invalid token is inactive too.
func (s *Server) ServeIntrospect(w http.ResponseWriter, r *http.Request) {
	f, e := readForm(r)
	if e != nil {
		writeError(w, e)
		return
	}
	raw := f["token"]
	if raw == "" {
		writeError(w, oauthErr(http.StatusBadRequest, errInvalidRequest, "token", "missing token"))
		return
	}
	id, secret, _, e := clientCredentials(r, f)
	if e != nil {
		writeError(w, e)
		return
	}
	if id == "" {
		writeError(w, oauthErr(http.StatusUnauthorized, errInvalidClient, "client_auth",
			"introspection requires client authentication"))
		return
	}
	if _, e := s.authenticateClient(r.Context(), id, secret); e != nil {
		writeError(w, e)
		return
	}
	claims := s.verifyAny(r.Context(), raw, f["token_type_hint"])
	if claims == nil || claims.ClientID != id {
		writeJSON(w, http.StatusOK, introspection{Active: false})
		return
	}
	if _, ae := s.liveLogin(r.Context(), claims); ae != nil {
		writeJSON(w, http.StatusOK, introspection{Active: false})
		return
	}
	resp := introspection{
		Active: true, Scope: claims.Scope, Patient: claims.Patient, ClientID: claims.ClientID, Username: claims.Subject,
		Exp: claims.ExpiresAt.Unix(), Iat: claims.IssuedAt.Unix(), Sub: claims.Subject,
		Aud: claims.Audience, Iss: claims.Issuer, Jti: claims.ID, LoginID: claims.LoginID, Profile: claims.Profile,
		TokenType: "Bearer",
	}
	if claims.Kind == tokens.KindRefresh {
		resp.TokenType = "refresh_token"
	}
	if !claims.NotBefore.IsZero() {
		resp.Nbf = claims.NotBefore.Unix()
	}
	writeJSON(w, http.StatusOK, resp)
}

package oauth

import (
	"context"
	"errors"
	"net/http"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
)

// ServeRevoke is POST /oauth2/revoke (RFC 7009). Revoking an access or a
// refresh token revokes its whole sign-in (the Login): every token issued
// for it is refused from the next request on. As the RFC requires, an
// invalid or unknown token is answered 200 too, so the endpoint cannot be
// used to probe tokens.
func (s *Server) ServeRevoke(w http.ResponseWriter, r *http.Request) {
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
	claims := s.verifyAny(r.Context(), raw, f["token_type_hint"])
	if claims == nil {
		writeJSON(w, http.StatusOK, struct{}{})
		return
	}
	if id != "" {
		if _, e := s.authenticateClient(r.Context(), id, secret); e != nil {
			writeError(w, e)
			return
		}
		if id != claims.ClientID {
			writeError(w, oauthErr(http.StatusBadRequest, errUnauthorizedClient, "client_mismatch",
				"the token was issued to another client"))
			return
		}
	}
	login, err := store.Get[store.Login](r.Context(), s.o.Store, claims.LoginID)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		writeError(w, storeFailure("loading the login", err))
		return
	default:
		s.revokeLogin(r.Context(), login)
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// verifyAny verifies a token as whichever kind it is, trying the hinted
// kind first. It returns nil for anything that does not verify.
func (s *Server) verifyAny(ctx context.Context, raw, hint string) *tokens.Claims {
	kinds := []tokens.Kind{tokens.KindAccess, tokens.KindRefresh}
	if hint == "refresh_token" {
		kinds[0], kinds[1] = kinds[1], kinds[0]
	}
	for _, k := range kinds {
		if c, err := s.o.Tokens.Verify(ctx, raw, k); err == nil {
			return c
		}
	}
	return nil
}

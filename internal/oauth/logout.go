package oauth

import (
	"context"
	"errors"
	"net/http"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/store"
)

// ServeLogout answers /oauth2/logout (GET or POST) for an authenticated
// caller, as Medplum does: the caller's sign-in is revoked — its access and
// refresh tokens are refused from the next request on, on this gateway at
// once and on others within their session cache's bound — and the answer
// is 200 with an all-ok OperationOutcome, which MedplumClient.signOut()
// waits for. A caller signed in by Basic credentials has no sign-in to end
// and gets the same answer.
func (s *Server) ServeLogout(w http.ResponseWriter, r *http.Request, id *Identity) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		fhir.WriteOutcome(w, http.StatusMethodNotAllowed, "/oauth2/logout accepts GET and POST")
		return
	}
	if err := s.Logout(r.Context(), id); err != nil {
		fhir.WriteOutcome(w, http.StatusInternalServerError, "signing out failed")
		return
	}
	fhir.WriteJSON(w, http.StatusOK, fhir.AllOK())
}

// Logout revokes the identity's sign-in.
func (s *Server) Logout(ctx context.Context, id *Identity) error {
	if id.LoginID == "" {
		return nil
	}
	login, err := store.Get[store.Login](ctx, s.o.Store, id.LoginID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	s.revokeLogin(ctx, login)
	return nil
}

// ServeUserinfo answers OpenID Connect's /oauth2/userinfo (GET or POST) for
// an authenticated caller: sub, the profile as SMART's fhirUser, and the
// email when the sign-in was granted the email scope.
func (s *Server) ServeUserinfo(w http.ResponseWriter, r *http.Request, id *Identity) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		writeError(w, oauthErr(http.StatusMethodNotAllowed, errInvalidRequest, "method", "use GET or POST"))
		return
	}
	info := map[string]any{"sub": id.UserID}
	if id.Profile != "" {
		info["fhirUser"] = id.Profile
	}
	if hasScope(id.Scope, "email") {
		if u, err := store.Get[store.User](r.Context(), s.o.Store, id.UserID); err == nil {
			info["email"] = u.Email
		}
	}
	writeJSON(w, http.StatusOK, info)
}

// Package session answers Medplum's GET /auth/me: the session details
// MedplumClient fetches right after a token exchange (it requires
// profile.id, and exchangeExternalAccessToken resolves to that profile).
//
// The profile is read from the FHIR backend, as the caller, through the
// site's own proxy; when the backend does not have it (or cannot be
// reached), a minimal profile built from the reference is answered rather
// than failing the sign-in.
package session

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// profileFetchTimeout bounds the backend read of the profile.
const profileFetchTimeout = 5 * time.Second

// backendProfiles are the profile types that live in the FHIR backend;
// others (Bot, ClientApplication) are fhirgate's own.
var backendProfiles = map[string]bool{"Practitioner": true, "Patient": true, "RelatedPerson": true}

// Me is Medplum's session shape.
type Me struct {
	Project      map[string]any `json:"project"`
	Membership   map[string]any `json:"membership"`
	Profile      map[string]any `json:"profile"`
	Config       map[string]any `json:"config"`
	AccessPolicy map[string]any `json:"accessPolicy,omitempty"`
}

// Handler serves /auth/me.
type Handler struct {
	Store  *store.Store
	Logger *zap.Logger
}

// Serve answers GET /auth/me for an authenticated caller.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, id *oauth.Identity, be *gateway.Backend) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		fhir.WriteOutcome(w, http.StatusMethodNotAllowed, "/auth/me accepts GET only")
		return
	}
	ctx := r.Context()
	project, err := store.Get[store.Project](ctx, h.Store, id.ProjectID)
	if err != nil {
		h.Logger.Error("loading project for /auth/me", zap.String("project", id.ProjectID), zap.Error(err))
		fhir.WriteOutcome(w, http.StatusInternalServerError, "loading the session failed")
		return
	}
	m, err := store.Get[store.ProjectMembership](ctx, h.Store, id.MembershipID)
	if err != nil {
		h.Logger.Error("loading membership for /auth/me", zap.String("membership", id.MembershipID), zap.Error(err))
		fhir.WriteOutcome(w, http.StatusInternalServerError, "loading the session failed")
		return
	}
	me := Me{
		Project: map[string]any{"resourceType": "Project", "id": project.ID, "name": project.Name},
		Membership: map[string]any{
			"resourceType": "ProjectMembership", "id": m.ID, "project": m.Project, "user": m.User, "admin": m.Admin,
		},
		Profile: h.profile(ctx, id, be),
		Config:  map[string]any{"resourceType": "UserConfiguration"},
	}
	if project.Description != "" {
		me.Project["description"] = project.Description
	}
	if m.Profile != nil {
		me.Membership["profile"] = m.Profile
	}
	if m.AccessPolicy != nil {
		me.AccessPolicy = map[string]any{"resourceType": "AccessPolicy", "id": strings.TrimPrefix(m.AccessPolicy.Reference, "AccessPolicy/")}
	}
	body, _ := json.Marshal(me) // maps of JSON-decoded values and strings: cannot fail
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// profile reads the caller's profile from the backend, or builds a
// minimal one from the reference.
func (h *Handler) profile(ctx context.Context, id *oauth.Identity, be *gateway.Backend) map[string]any {
	typ, pid, _ := strings.Cut(id.Profile, "/")
	minimal := map[string]any{"resourceType": typ, "id": pid}
	if !backendProfiles[typ] || pid == "" || be == nil {
		return minimal
	}
	ctx, cancel := context.WithTimeout(ctx, profileFetchTimeout)
	defer cancel()
	resp, err := be.Do(ctx, http.MethodGet, typ+"/"+pid, nil, nil, nil)
	if err != nil || resp.Status != http.StatusOK {
		status := 0
		if resp != nil {
			status = resp.Status
		}
		h.Logger.Debug("profile not read from the backend; answering a minimal one",
			zap.String("profile", id.Profile), zap.Int("status", status), zap.Error(err))
		return minimal
	}
	var res map[string]any
	if json.Unmarshal(resp.Body, &res) != nil || res["resourceType"] != typ || res["id"] != pid {
		return minimal
	}
	return res
}

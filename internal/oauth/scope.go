package oauth

import (
	"net/http"
	"slices"
	"strings"

	"github.com/fhirgate/fhirgate/internal/authz"
	"github.com/fhirgate/fhirgate/internal/store"
)

// grantScope is the scope a sign-in of client is granted for requested
// (RFC 6749 §3.3): requested intersected with what the client allows
// (ClientApplication.scope; none declared allows full access). A request
// with no scope asks for defaultScope, which then carries the client's
// allowed resource scopes. Bad syntax, or resource scopes none of which
// the client allows, or none known, is invalid_scope.
func grantScope(requested string, client *store.ClientApplication) (string, *Error) {
	if strings.TrimSpace(requested) == "" {
		requested = defaultScope
	}
	granted, err := authz.Grant(requested, client.Scope)
	if err != nil {
		return "", oauthErr(http.StatusBadRequest, errInvalidScope, "scope", err.Error())
	}
	if granted == "" {
		// Only tokens Grant does not know (and so never grants): an empty
		// grant would read as full access.
		return "", oauthErr(http.StatusBadRequest, errInvalidScope, "scope", "none of the requested scopes is known")
	}
	return granted, nil
}

// narrowScope is the scope a refresh issues (RFC 6749 §6): without a
// requested scope, the sign-in's original grant; with one, that scope,
// each of whose tokens must already be granted — literally, or, for a
// resource scope, wholly within a granted one (patient/Observation.rs
// under patient/*.rs). Either way it is intersected with what the client
// allows now, so narrowing a client takes effect at its sign-ins' next
// refresh.
func narrowScope(requested, original string, client *store.ClientApplication) (string, *Error) {
	if strings.TrimSpace(requested) == "" {
		requested = original
	} else {
		granted := strings.Fields(original)
		for _, tok := range strings.Fields(requested) {
			if slices.Contains(granted, tok) {
				continue
			}
			set, err := authz.Parse(tok)
			if err != nil {
				return "", oauthErr(http.StatusBadRequest, errInvalidScope, "scope", err.Error())
			}
			if len(set.Scopes) == 0 {
				return "", oauthErr(http.StatusBadRequest, errInvalidScope, "scope_widened", "a refresh cannot add scope "+tok)
			}
			// Grant returns a resource scope as written only when the
			// original grant covers all of it.
			if g, err := authz.Grant(tok, original); err != nil || g != tok {
				return "", oauthErr(http.StatusBadRequest, errInvalidScope, "scope_widened", "a refresh cannot widen the granted scope with "+tok)
			}
		}
	}
	granted, err := authz.Grant(requested, client.Scope)
	if err != nil {
		return "", oauthErr(http.StatusBadRequest, errInvalidScope, "scope", err.Error())
	}
	return granted, nil
}

// patientContext returns the Patient id a token of this scope and profile
// carries (SMART's "patient" launch context): the profile's id when the
// profile is a Patient and the scope has patient/ scopes or launch/patient.
func patientContext(scope, profile string) string {
	id, ok := strings.CutPrefix(profile, "Patient/")
	if !ok || id == "" {
		return ""
	}
	set, err := authz.Parse(scope)
	if err != nil {
		return "" // granted scopes were parsed when granted
	}
	if slices.Contains(set.Other, "launch/patient") {
		return id
	}
	for _, s := range set.Scopes {
		if s.Context == authz.ContextPatient {
			return id
		}
	}
	return ""
}

// hasScope tells whether a space-separated scope grants one of names.
func hasScope(scope string, names ...string) bool {
	for _, tok := range strings.Fields(scope) {
		if slices.Contains(names, tok) {
			return true
		}
	}
	return false
}

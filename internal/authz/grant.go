package authz

import (
	"fmt"
	"slices"
	"strings"
)

// Grant returns the scope to grant when a client allowed allowed asks for
// requested (both space-separated). The rule:
//
//   - allowed with no resource scope (empty, or only tokens such as
//     "openid") allows every resource scope: patient/*.cruds,
//     user/*.cruds and system/*.cruds — today's full access.
//   - A requested resource scope is intersected with every allowed one:
//     same context (a patient/ scope also fits inside a user/ or system/
//     one, narrowed to patient/), type equal or either "*", permissions
//     anded, granular parameters of both kept. A requested scope wholly
//     inside an allowed one is granted as written; one only partly inside
//     is granted as its intersections, in SMART v2 form (user/*.cruds
//     under an allowed user/Observation.rs gives user/Observation.rs).
//   - A request with no resource scope gets the allowed resource scopes,
//     as SMART lets a server grant its default. With a full allowed set
//     the granted scope then has no resource scope either, which the gate
//     reads as full access.
//   - A request with resource scopes none of which intersects an allowed
//     one fails (ErrInvalidScope): granting only "openid" would read as
//     full access.
//   - Non-resource tokens (openid, fhirUser, offline_access, launch, …)
//     are granted when requested and either allowed lists no non-resource
//     token or lists this one. Unknown tokens are dropped.
//
// Errors wrap ErrInvalidScope: bad syntax in either string, or nothing
// grantable.
func Grant(requested, allowed string) (granted string, err error) {
	req, err := Parse(requested)
	if err != nil {
		return "", err
	}
	al, err := Parse(allowed)
	if err != nil {
		return "", fmt.Errorf("allowed scope: %w", err)
	}
	out := make([]string, 0, len(req.Other)+len(req.Scopes))
	for _, o := range req.Other {
		if (len(al.Other) == 0 || slices.Contains(al.Other, o)) && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	switch {
	case len(req.Scopes) == 0:
		for _, a := range al.Scopes {
			out = appendScope(out, a.text)
		}
	case al.Full():
		for _, r := range req.Scopes {
			out = appendScope(out, r.text)
		}
	default:
		granted := grantScopes(req.Scopes, al.Scopes)
		if len(granted) == 0 {
			return "", fmt.Errorf("%w: none of the requested resource scopes is allowed for this client", ErrInvalidScope)
		}
		out = append(out, granted...)
	}
	return strings.Join(out, " "), nil
}

func appendScope(out []string, s string) []string {
	if slices.Contains(out, s) {
		return out
	}
	return append(out, s)
}

// grantScopes intersects each requested scope with each allowed one and
// drops results another result already covers.
func grantScopes(req, al []Scope) []string {
	var kept []Scope
	for _, r := range req {
		whole := false
		for _, a := range al {
			if within(r, a) {
				whole = true
				break
			}
		}
		if whole {
			kept = append(kept, r)
			continue
		}
		for _, a := range al {
			if x, ok := intersect(r, a); ok {
				x.text = x.String()
				kept = append(kept, x)
			}
		}
	}
	var out []string
	for i, k := range kept {
		covered := false
		for j, o := range kept {
			if i != j && within(k, o) && (!within(o, k) || j < i) {
				covered = true
				break
			}
		}
		if !covered {
			out = appendScope(out, k.text)
		}
	}
	return out
}

// intersect returns the scope allowing what both a and b allow.
func intersect(a, b Scope) (Scope, bool) {
	var x Scope
	switch {
	case a.Context == b.Context:
		x.Context = a.Context
	case a.Context == ContextPatient || b.Context == ContextPatient:
		x.Context = ContextPatient
	default:
		return x, false
	}
	switch {
	case a.Type == b.Type || b.Type == "*":
		x.Type = a.Type
	case a.Type == "*":
		x.Type = b.Type
	default:
		return x, false
	}
	x.Perms = a.Perms & b.Perms
	if x.Perms == 0 {
		return x, false
	}
	x.Params = mergeParams(a.Params, b.Params)
	return x, true
}

// within tells whether everything a allows b allows.
func within(a, b Scope) bool {
	if a.Context != b.Context && (a.Context != ContextPatient || b.Context == ContextPatient) {
		return false
	}
	if b.Type != "*" && a.Type != b.Type {
		return false
	}
	if a.Perms&^b.Perms != 0 {
		return false
	}
	// Every restriction of b must restrict a too.
	for _, p := range b.Params {
		if !slices.Contains(a.Params, p) {
			return false
		}
	}
	return true
}

func mergeParams(a, b []Param) []Param {
	if len(b) == 0 {
		return a
	}
	out := slices.Clone(a)
	for _, p := range b {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(x, y Param) int {
		if c := strings.Compare(x.Name, y.Name); c != 0 {
			return c
		}
		return strings.Compare(x.Value, y.Value)
	})
	return out
}

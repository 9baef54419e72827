package authz

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/fhirgate/fhirgate/internal/fhir"
)

// Options configures an Authorizer. The zero value is valid.
type Options struct {
	// FHIRBase is the path of the FHIR base ("/fhir/R4"), for batch
	// entries with absolute URLs.
	FHIRBase string
	// Operations are operations allowed beyond the built-in table, by
	// name ("$validate-code", with its "$"), each with the permissions it
	// needs on the type of its path ("r", "rs"; on "*" at the system
	// level).
	Operations map[string]string
}

// maxCachedScopes bounds the cache of parsed scope strings: a token's
// scope is parsed once, not on every request.
const maxCachedScopes = 4096

// Authorizer decides requests against tokens' scopes. It is safe for
// concurrent use.
type Authorizer struct {
	base string
	ops  map[string]opRule

	mu    sync.Mutex
	cache map[string]*Set
}

// New returns an Authorizer.
func New(o Options) (*Authorizer, error) {
	a := &Authorizer{ops: map[string]opRule{}, cache: map[string]*Set{}}
	if o.FHIRBase != "" {
		a.base = path.Clean("/" + o.FHIRBase)
	}
	names := make([]string, 0, len(o.Operations))
	for n := range o.Operations {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if len(n) < 2 || n[0] != '$' || strings.ContainsAny(n, "/?# ") {
			return nil, fmt.Errorf("operation %q: must be a name starting with $", n)
		}
		p, err := parsePerms(o.Operations[n])
		if err != nil || o.Operations[n] == "*" || o.Operations[n] == "read" || o.Operations[n] == "write" {
			return nil, fmt.Errorf("operation %s: permissions %q must be a subset of cruds in that order", n, o.Operations[n])
		}
		a.ops[n] = opRule{perm: p, system: true, typeLevel: true, instance: true}
	}
	return a, nil
}

// Access is what one token may do: its parsed scope and patient context.
type Access struct {
	set *Set
	// patient is the patient context's Patient id, or "".
	patient string
	err     error
}

// Access returns the access a token's scope and patient context give. A
// scope that does not parse gives no access at all (every Decide denies).
func (a *Authorizer) Access(scope, patient string) *Access {
	a.mu.Lock()
	set, ok := a.cache[scope]
	a.mu.Unlock()
	if !ok {
		var err error
		set, err = Parse(scope)
		if err != nil {
			return &Access{err: err}
		}
		a.mu.Lock()
		if len(a.cache) >= maxCachedScopes {
			clear(a.cache)
		}
		a.cache[scope] = set
		a.mu.Unlock()
	}
	return &Access{set: set, patient: patient}
}

// Full tells whether the access is unrestricted (no resource scope).
func (acc *Access) Full() bool { return acc.err == nil && acc.set.Full() }

// patientScoped tells whether any scope is a patient/ one.
func (acc *Access) patientScoped() bool {
	if acc.err != nil {
		return false
	}
	for _, s := range acc.set.Scopes {
		if s.Context == ContextPatient {
			return true
		}
	}
	return false
}

// NeedsBody tells whether Decide needs the request body: a batch or
// transaction, a POST _search, and, with a patient/ scope, a write.
func (acc *Access) NeedsBody(method string, segments []string) bool {
	if method != http.MethodPost && method != http.MethodPut && method != http.MethodPatch {
		return false
	}
	if acc.Full() {
		return false
	}
	if method == http.MethodPost && (len(segments) == 0 || segments[len(segments)-1] == "_search") {
		return true
	}
	return acc.patientScoped()
}

// Decision is the outcome of Decide.
type Decision struct {
	// Denied, when set, is the 403 to answer; the backend must not see
	// the request.
	Denied *fhir.Error
	// CheckResponse says the backend's answer must pass CheckResponse
	// before it reaches the client (patient context: reads and searches
	// whose results cannot be confined by the request alone).
	CheckResponse bool
	// Stored are the resources ("Observation/123") whose stored version
	// must pass CheckStored before the request is forwarded (patient
	// context: updates, patches and deletes).
	Stored []string
}

// Decide decides a request. It never calls the backend.
func (a *Authorizer) Decide(acc *Access, req *Request) Decision {
	if acc.err != nil {
		return deny("the token's scope does not parse: " + acc.err.Error())
	}
	if acc.set.Full() {
		// Full access (tokens without resource scopes) keeps today's
		// behaviour but for one rule: an operation must be known.
		if op := operationOf(req.Segments); op != "" && req.Method != http.MethodOptions && !a.knownOperation(op) {
			return deny("operation " + op + " is not allowed through the gate (not in its operations table or the handler's operations)")
		}
		return Decision{}
	}
	needs, err := a.classify(req, false)
	if err != nil {
		var r refusal
		if errors.As(err, &r) {
			return deny(string(r))
		}
		return deny(err.Error())
	}
	var d Decision
	for i := range needs {
		n := &needs[i]
		res := acc.check(n)
		if !res.ok {
			return deny(res.message(n))
		}
		d.CheckResponse = d.CheckResponse || res.checkResponse
		if res.stored != "" && !slices.Contains(d.Stored, res.stored) {
			d.Stored = append(d.Stored, res.stored)
		}
	}
	return d
}

// operationOf returns the operation a path names at the system, type or
// instance level, as gateway.Target reads it, or "".
func operationOf(segs []string) string {
	for i, s := range segs {
		if i > 2 {
			break
		}
		if strings.HasPrefix(s, "$") {
			return s
		}
	}
	return ""
}

// knownOperation tells whether op is in the built-in table or configured.
func (a *Authorizer) knownOperation(op string) bool {
	if _, ok := a.ops[op]; ok {
		return true
	}
	_, ok := builtinOps[op]
	return ok
}

func deny(msg string) Decision {
	return Decision{Denied: &fhir.Error{Status: http.StatusForbidden, Message: msg}}
}

// result is the outcome of one need.
type result struct {
	ok            bool
	checkResponse bool
	stored        string
	// patientWhy explains why a matching patient/ scope did not apply.
	patientWhy string
}

func (r result) message(n *need) string {
	perm := n.perm.String()
	msg := fmt.Sprintf("insufficient scope: %s needs %s.%s (for example user/%s.%s)", n.why, n.typ, perm, n.typ, perm)
	if r.patientWhy != "" {
		msg += "; " + r.patientWhy
	}
	return msg
}

// check finds a scope granting n. A user/ or system/ scope grants it
// outright; a patient/ scope only within the patient's compartment.
func (acc *Access) check(n *need) result {
	var patient result
	for i := range acc.set.Scopes {
		s := &acc.set.Scopes[i]
		if s.Perms&n.perm == 0 || (s.Type != "*" && s.Type != n.typ) {
			continue
		}
		if len(s.Params) > 0 && !granularAllows(s.Params, n) {
			continue
		}
		if s.Context != ContextPatient {
			return result{ok: true}
		}
		if !patient.ok {
			patient = acc.confine(n)
		}
	}
	return patient
}

// granularAllows tells whether a scope restricted to params allows n:
// only a search whose own query carries every param with exactly that
// value. Reads and writes would need the resource itself checked, so a
// granular scope never grants them.
func granularAllows(params []Param, n *need) bool {
	if n.perm != PermSearch || n.query == nil {
		return false
	}
	for _, p := range params {
		if !slices.Contains(n.query[p.Name], p.Value) {
			return false
		}
	}
	return true
}

// confine applies the patient context to a need a patient/ scope matches.
func (acc *Access) confine(n *need) result {
	pid := acc.patient
	if pid == "" {
		return result{patientWhy: "the token's patient/ scopes need a patient context, and it has none"}
	}
	if n.compartment != "" {
		if n.compartment == pid {
			return result{ok: true, checkResponse: true}
		}
		return result{patientWhy: "Patient/" + n.compartment + " is not the token's patient"}
	}
	if n.pages && n.perm == PermSearch {
		return result{ok: true, checkResponse: true}
	}
	if n.typ == "*" {
		return result{patientWhy: "a patient/ scope cannot confine a request that reaches every type"}
	}
	switch compartmentOf(n.typ) {
	case kindOutside:
		if n.perm == PermRead || n.perm == PermSearch {
			return result{ok: true}
		}
		return result{patientWhy: n.typ + " is not patient data; a patient/ scope does not write it"}
	case kindUnchecked:
		return result{patientWhy: n.typ + " is in the Patient compartment but the gate cannot confine it"}
	case kindPatient:
		return acc.confinePatient(n, pid)
	}
	return acc.confineMember(n, pid)
}

// confinePatient: the Patient resource itself.
func (acc *Access) confinePatient(n *need, pid string) result {
	notYours := result{patientWhy: "only Patient/" + pid + " is in the token's patient context"}
	switch n.perm {
	case PermRead:
		if n.id == pid {
			return result{ok: true}
		}
		return notYours
	case PermSearch:
		if r, ok := confineSearch(n, onlyValue(n.query["_id"], pid)); ok {
			return r
		}
		return result{patientWhy: "a Patient search in a patient context must name _id=" + pid}
	case PermUpdate:
		if n.id == pid && !n.patch && resourceIs(n.body, "Patient", pid) {
			return result{ok: true}
		}
		return notYours
	}
	return notYours
}

// confineSearch decides a search need under a patient/ scope: a chain or
// _has only filters the primary search; a type reached by _include is
// checked in the answer; the primary search must name the patient
// (named).
func confineSearch(n *need, named bool) (result, bool) {
	switch {
	case n.criterion:
		return result{ok: true}, true
	case n.query == nil, named:
		return result{ok: true, checkResponse: true}, true
	}
	return result{}, false
}

// confineMember: a type of the Patient compartment.
func (acc *Access) confineMember(n *need, pid string) result {
	switch n.perm {
	case PermRead:
		if n.id == "" {
			return result{patientWhy: "type history cannot be confined to a patient"}
		}
		return result{ok: true, checkResponse: true}
	case PermSearch:
		if r, ok := confineSearch(n, confinedQuery(n.typ, n.query, pid)); ok {
			return r
		}
		m := patientCompartment[n.typ]
		return result{patientWhy: fmt.Sprintf("a search of %s in a patient context must name the patient (%s=Patient/%s)", n.typ, m.params[0], pid)}
	case PermCreate:
		if err := writeBelongs(n.typ, n.body, pid); err != nil {
			return result{patientWhy: err.Error()}
		}
		return result{ok: true}
	case PermUpdate:
		if n.id == "" {
			return result{patientWhy: "a conditional write cannot be confined to a patient"}
		}
		if n.patch {
			if err := patchKeepsPatient(n.typ, n.body); err != nil {
				return result{patientWhy: err.Error()}
			}
		} else if err := writeBelongs(n.typ, n.body, pid); err != nil {
			return result{patientWhy: err.Error()}
		}
		return result{ok: true, stored: n.typ + "/" + n.id}
	case PermDelete:
		if n.id == "" {
			return result{patientWhy: "a conditional delete cannot be confined to a patient"}
		}
		return result{ok: true, stored: n.typ + "/" + n.id}
	}
	return result{}
}

// onlyValue tells whether values is exactly one value equal to want.
func onlyValue(values []string, want string) bool {
	return len(values) == 1 && values[0] == want
}

// confinedQuery tells whether a search of typ names the patient through
// one of the type's compartment parameters or "patient": patient=123,
// patient=Patient/123, subject=Patient/123, subject:Patient=123. A list
// (123,456) does not confine.
func confinedQuery(typ string, q url.Values, pid string) bool {
	m := patientCompartment[typ]
	ref := "Patient/" + pid
	for _, p := range append([]string{"patient"}, m.params...) {
		for _, v := range q[p] {
			if v == ref || (p == "patient" && v == pid) {
				return true
			}
		}
		for _, v := range q[p+":Patient"] {
			if v == pid || v == ref {
				return true
			}
		}
	}
	return false
}

// CheckStored checks, in a patient context, the stored version of a
// resource Decide listed in Stored (the backend's read of it, status
// 200): it must be in the patient's compartment.
func (acc *Access) CheckStored(ref string, body []byte) *fhir.Error {
	typ, _, _ := strings.Cut(ref, "/")
	if !inCompartment(typ, body, acc.patient) {
		return &fhir.Error{Status: http.StatusForbidden, Message: "insufficient scope: " + ref + " is outside the token's patient compartment (Patient/" + acc.patient + ")"}
	}
	return nil
}

// CheckResponse checks, in a patient context, a successful answer the
// backend gave to a request Decide marked CheckResponse: a resource, or a
// Bundle (search, history, batch response, $everything) whose every
// resource must be the patient, in the patient's compartment, or of a
// type outside the compartment. A body that is not JSON fails: the gate
// does not pass on what it cannot read.
func (acc *Access) CheckResponse(body []byte) *fhir.Error {
	if err := checkResource(body, acc.patient); err != nil {
		return &fhir.Error{Status: http.StatusForbidden, Message: "insufficient scope: the answer holds " + err.Error() + ", outside the token's patient compartment (Patient/" + acc.patient + ")"}
	}
	return nil
}

package authz

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// Request is what the gate knows of a request under the FHIR base.
type Request struct {
	// Method is the HTTP method.
	Method string
	// Segments are the decoded path segments below the FHIR base
	// (gateway.Target.Segments): [] for the base, ["Patient", "123"].
	Segments []string
	// Query is the parsed query string.
	Query url.Values
	// Header carries Content-Type and If-None-Exist.
	Header http.Header
	// Body is the request body when NeedsBody said it is needed; nil
	// otherwise.
	Body []byte
}

// need is one permission a request needs.
type need struct {
	perm Perm
	// typ is a resource type, or "*" for every type.
	typ string
	// why names the part of the request that needs it, for the 403.
	why string
	// query is the primary search's parameters: granular scopes and the
	// patient confinement read them. Nil for types a search only reaches.
	query url.Values
	// id is the instance a read, update or delete names.
	id string
	// body is the resource a create or update sends (patient context).
	body []byte
	// patch is set for a patch: body is the patch document.
	patch bool
	// criterion marks a type reached by a chain or _has: it filters the
	// primary search and returns none of its own data.
	criterion bool
	// compartment is the Patient id whose compartment the need is confined
	// to by its path (Patient/{id}/Observation, Patient/{id}/$everything).
	compartment string
	// pages marks a paging link that names no type (HAPI's _getpages).
	pages bool
}

// Interaction names, for messages.
const (
	whyRead     = "read"
	whySearch   = "search"
	whyHistory  = "history"
	whyCreate   = "create"
	whyUpdate   = "update"
	whyPatch    = "patch"
	whyDelete   = "delete"
	whyInclude  = "_include"
	whyRevInc   = "_revinclude"
	whyHas      = "_has"
	whyChain    = "a chained parameter"
	whyOp       = "operation "
	whyFilter   = "_filter or _query"
	whyTypeList = "_type"
)

// refusal is a request the gate refuses before looking at scopes.
type refusal string

func (r refusal) Error() string { return string(r) }

// opRule is one known operation: the permission it needs, on which type
// (empty: the type of the path) and at which levels.
type opRule struct {
	perm Perm
	// onType, when set, is the only type the operation is known on.
	onType string
	// system, typeLevel, instance are the levels it is known at.
	system, typeLevel, instance bool
	// search: the operation is a search of its type (its query is read as
	// search parameters).
	search bool
	// everything: the whole compartment of the instance.
	everything bool
}

// builtinOps is the small table of operations fhirgate knows. Any other
// operation is refused unless the handler's config lists it.
var builtinOps = map[string]opRule{
	"$execute":       {perm: PermRead, onType: "Bot", typeLevel: true, instance: true},
	"$deploy":        {perm: PermUpdate, onType: "Bot", instance: true},
	"$everything":    {perm: PermRead, onType: "Patient", instance: true, everything: true},
	"$lastn":         {perm: PermSearch, onType: "Observation", typeLevel: true, search: true},
	"$expand":        {perm: PermRead, typeLevel: true, instance: true, onType: "ValueSet"},
	"$validate-code": {perm: PermRead, typeLevel: true, instance: true},
	"$lookup":        {perm: PermRead, onType: "CodeSystem", typeLevel: true},
	"$subsumes":      {perm: PermRead, onType: "CodeSystem", typeLevel: true, instance: true},
	"$translate":     {perm: PermRead, onType: "ConceptMap", typeLevel: true, instance: true},
	"$validate":      {perm: PermRead, typeLevel: true, instance: true},
	"$meta":          {perm: PermRead, system: true, typeLevel: true, instance: true},
}

// classify turns a request into the permissions it needs. A nil slice
// with a nil error means the request needs none (capabilities).
func (a *Authorizer) classify(req *Request, inBatch bool) ([]need, error) {
	segs := req.Segments
	for _, s := range segs {
		if err := checkSegment(s); err != nil {
			return nil, err
		}
	}
	m := req.Method
	if m == http.MethodHead {
		m = http.MethodGet
	}
	if m == http.MethodOptions {
		return nil, nil
	}
	switch len(segs) {
	case 0:
		switch m {
		case http.MethodGet:
			return a.searchNeeds("", req.Query, "")
		case http.MethodPost:
			if inBatch {
				return nil, refusal("a batch or transaction cannot hold another one")
			}
			return a.batchNeeds(req.Body)
		}
		return nil, refusal("the FHIR base accepts GET (search) and POST (batch or transaction) only")
	}
	first := segs[0]
	if strings.HasPrefix(first, "$") {
		return a.opNeeds(first, "", "", req)
	}
	switch first {
	case "metadata":
		if len(segs) == 1 && m == http.MethodGet {
			return nil, nil
		}
		return nil, refusal("metadata accepts GET only")
	case "_search":
		if len(segs) == 1 && m == http.MethodPost {
			return a.searchNeeds("", searchParams(req), "")
		}
		return nil, refusal("_search accepts POST only")
	case "_history":
		if len(segs) == 1 && m == http.MethodGet {
			return []need{{perm: PermRead, typ: "*", why: whyHistory}}, nil
		}
		return nil, refusal("_history accepts GET only")
	case "job":
		// fhirgate's own status of an asynchronous $execute.
		if len(segs) == 3 && segs[2] == "status" && m == http.MethodGet {
			return []need{{perm: PermRead, typ: "Bot", why: "the status of a bot run"}}, nil
		}
	}
	if !validTypeName(first) {
		return nil, refusal("not a FHIR resource type: " + first)
	}
	typ := first
	if len(segs) == 1 {
		return a.typeNeeds(typ, m, req)
	}
	second := segs[1]
	switch {
	case strings.HasPrefix(second, "$"):
		return a.opNeeds(second, typ, "", req)
	case second == "_search":
		if len(segs) == 2 && m == http.MethodPost {
			return a.searchNeeds(typ, searchParams(req), "")
		}
		return nil, refusal("_search accepts POST only")
	case second == "_history":
		if len(segs) == 2 && m == http.MethodGet {
			return []need{{perm: PermRead, typ: typ, why: whyHistory}}, nil
		}
		return nil, refusal("type history accepts GET only")
	}
	id := second
	if len(segs) == 2 {
		return instanceNeeds(typ, id, m, req)
	}
	third := segs[2]
	switch {
	case strings.HasPrefix(third, "$"):
		return a.opNeeds(third, typ, id, req)
	case third == "_history" && m == http.MethodGet && len(segs) <= 4:
		return []need{{perm: PermRead, typ: typ, id: id, why: whyHistory}}, nil
	case len(segs) == 3 && m == http.MethodGet && validTypeName(third):
		// A compartment search: Patient/123/Observation.
		compartment := ""
		if typ == "Patient" {
			compartment = id
		}
		return a.searchNeeds(third, req.Query, compartment)
	}
	return nil, refusal("not a FHIR interaction the gate knows")
}

// checkSegment refuses a decoded path segment a backend could read as
// more than one segment or as another path: a separator, a further escape
// (double encoding), a control character, or a dot segment.
func checkSegment(s string) error {
	if s == "." || s == ".." {
		return refusal("the path has a dot segment")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '/' || c == '\\' || c == '%':
			return refusal("a path segment holds an encoded separator or escape")
		case c < 0x20 || c == 0x7f:
			return refusal("a path segment holds a control character")
		}
	}
	return nil
}

// typeNeeds covers [base]/Type.
func (a *Authorizer) typeNeeds(typ, m string, req *Request) ([]need, error) {
	switch m {
	case http.MethodGet:
		return a.searchNeeds(typ, req.Query, "")
	case http.MethodPost:
		out := []need{{perm: PermCreate, typ: typ, why: whyCreate, body: req.Body}}
		if cond := req.Header.Get("If-None-Exist"); cond != "" {
			// A conditional create tells whether a match exists.
			q, err := url.ParseQuery(strings.TrimPrefix(cond, "?"))
			if err != nil {
				return nil, refusal("If-None-Exist is not a query")
			}
			out = append(out, need{perm: PermSearch, typ: typ, query: q, why: "If-None-Exist", criterion: true})
		}
		return out, nil
	case http.MethodPut, http.MethodPatch, http.MethodDelete:
		// Conditional update, patch and delete: a search, then the write.
		perm, why := PermUpdate, whyUpdate
		if m == http.MethodDelete {
			perm, why = PermDelete, whyDelete
		}
		s, err := a.searchNeeds(typ, req.Query, "")
		if err != nil {
			return nil, err
		}
		return append(s, need{perm: perm, typ: typ, why: "conditional " + why, body: req.Body, patch: m == http.MethodPatch}), nil
	}
	return nil, refusal("method " + m + " is not a FHIR interaction on a type")
}

// instanceNeeds covers [base]/Type/id.
func instanceNeeds(typ, id, m string, req *Request) ([]need, error) {
	switch m {
	case http.MethodGet:
		return []need{{perm: PermRead, typ: typ, id: id, why: whyRead}}, nil
	case http.MethodPut:
		return []need{{perm: PermUpdate, typ: typ, id: id, why: whyUpdate, body: req.Body}}, nil
	case http.MethodPatch:
		return []need{{perm: PermUpdate, typ: typ, id: id, why: whyPatch, body: req.Body, patch: true}}, nil
	case http.MethodDelete:
		return []need{{perm: PermDelete, typ: typ, id: id, why: whyDelete}}, nil
	}
	return nil, refusal("method " + m + " is not a FHIR interaction on an instance")
}

// opNeeds covers $operations at every level.
func (a *Authorizer) opNeeds(op, typ, id string, req *Request) ([]need, error) {
	rule, ok := a.ops[op]
	if !ok {
		rule, ok = builtinOps[op]
	}
	level := "system"
	allowed := rule.system
	switch {
	case id != "":
		level, allowed = "instance", rule.instance
	case typ != "":
		level, allowed = "type", rule.typeLevel
	}
	if !ok || !allowed || (rule.onType != "" && typ != rule.onType) {
		where := level + " level"
		if typ != "" {
			where += " of " + typ
		}
		return nil, refusal("operation " + op + " at the " + where + " is not allowed through the gate (not in its operations table or the handler's operations)")
	}
	if rule.search {
		return a.searchNeeds(typ, req.Query, "")
	}
	t := typ
	if t == "" {
		t = "*"
	}
	out := []need{{perm: rule.perm, typ: t, id: id, why: whyOp + op}}
	if rule.everything {
		out = append(out, need{perm: PermSearch, typ: "*", why: whyOp + op, compartment: id})
	}
	return out, nil
}

// searchParams returns a POST _search's parameters: the query and the
// form body together.
func searchParams(req *Request) url.Values {
	q := url.Values{}
	for k, v := range req.Query {
		q[k] = append(q[k], v...)
	}
	if len(req.Body) > 0 {
		if form, err := url.ParseQuery(string(req.Body)); err == nil {
			for k, v := range form {
				q[k] = append(q[k], v...)
			}
		} else {
			// An unreadable form could hide a parameter from the gate.
			q["_filter"] = append(q["_filter"], "unreadable form body")
		}
	}
	return q
}

// searchNeeds returns what a search of typ ("" for a system search) with
// query needs: s on its type(s), and s on every type it reaches.
func (a *Authorizer) searchNeeds(typ string, q url.Values, compartment string) ([]need, error) {
	out := make([]need, 0, 1+len(q))
	switch {
	case q.Has("_getpages"):
		// A paging link names no type: the page's content is checked
		// instead (patient context), or s on every type is needed.
		return []need{{perm: PermSearch, typ: "*", why: whySearch, pages: true}}, nil
	case typ != "":
		out = append(out, need{perm: PermSearch, typ: typ, why: whySearch, query: q, compartment: compartment})
	case q.Has("_type"):
		for _, list := range q["_type"] {
			for t := range strings.SplitSeq(list, ",") {
				if !validTypeName(t) {
					return nil, refusal("_type holds " + t + ", not a resource type")
				}
				out = append(out, need{perm: PermSearch, typ: t, why: whyTypeList, query: q})
			}
		}
	default:
		out = append(out, need{perm: PermSearch, typ: "*", why: whySearch, query: q})
	}
	// Sorted, so the first missing permission named is the same every time.
	keys := make([]string, 0, len(q))
	for key := range q {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		values := q[key]
		name, modifier, _ := strings.Cut(key, ":")
		switch {
		case name == "_include" || name == "_revinclude":
			rev := name == "_revinclude"
			why := whyInclude
			if rev {
				why = whyRevInc
			}
			if modifier != "" && modifier != "iterate" && modifier != "recurse" {
				return nil, refusal(key + " is not a known include")
			}
			for _, v := range values {
				for _, t := range includeTargets(v, rev) {
					out = append(out, need{perm: PermSearch, typ: t, why: why})
				}
			}
		case name == "_has":
			types, ok := hasTypes(key)
			if !ok {
				return nil, refusal(key + " is not a valid _has parameter")
			}
			for _, t := range types {
				out = append(out, need{perm: PermSearch, typ: t, why: whyHas, criterion: true})
			}
		case name == "_filter" || name == "_query":
			out = append(out, need{perm: PermSearch, typ: "*", why: whyFilter})
		case strings.Contains(key, "."):
			for _, t := range chainTypes(key) {
				out = append(out, need{perm: PermSearch, typ: t, why: whyChain, criterion: true})
			}
		}
	}
	return out, nil
}

// includeTargets reads "Source:param[:Target]" (or "*"): an include
// reaches its target, a revinclude its source.
func includeTargets(v string, rev bool) []string {
	parts := strings.Split(v, ":")
	if v == "*" || len(parts) < 2 || len(parts) > 3 || !validTypeName(parts[0]) {
		return []string{"*"}
	}
	if rev {
		return []string{parts[0]}
	}
	explicit := ""
	if len(parts) == 3 {
		if !validTypeName(parts[2]) {
			return []string{"*"}
		}
		explicit = parts[2]
	}
	if parts[1] == "*" {
		return []string{"*"}
	}
	return targetsOf(parts[1], explicit)
}

// hasTypes reads "_has:Type:param:_has:Type2:param2:search" and returns
// the types reached.
func hasTypes(key string) ([]string, bool) {
	var out []string
	rest := key
	for strings.HasPrefix(rest, "_has:") {
		parts := strings.SplitN(rest[len("_has:"):], ":", 3)
		if len(parts) < 3 || !validTypeName(parts[0]) || parts[1] == "" {
			return nil, false
		}
		out = append(out, parts[0])
		rest = parts[2]
	}
	return out, len(out) > 0 && rest != ""
}

// chainTypes reads a chained parameter ("subject:Patient.organization.name")
// and returns every type a hop reaches.
func chainTypes(key string) []string {
	hops := strings.Split(key, ".")
	var out []string
	for _, hop := range hops[:len(hops)-1] {
		param, explicit, _ := strings.Cut(hop, ":")
		if explicit != "" && !validTypeName(explicit) {
			explicit = "" // a modifier, not a type: every target
		}
		out = append(out, targetsOf(param, explicit)...)
	}
	return out
}

// bundle is the part of a batch or transaction the gate reads.
type bundle struct {
	ResourceType string `json:"resourceType"`
	Type         string `json:"type"`
	Entry        []struct {
		Resource json.RawMessage `json:"resource"`
		Request  *struct {
			Method      string `json:"method"`
			URL         string `json:"url"`
			IfNoneExist string `json:"ifNoneExist"`
		} `json:"request"`
	} `json:"entry"`
}

// batchNeeds checks a batch or transaction entry by entry.
func (a *Authorizer) batchNeeds(body []byte) ([]need, error) {
	var b bundle
	if err := json.Unmarshal(body, &b); err != nil || b.ResourceType != "Bundle" {
		return nil, refusal("a POST to the FHIR base must carry a batch or transaction Bundle")
	}
	if b.Type != "batch" && b.Type != "transaction" {
		return nil, refusal("a Bundle posted to the FHIR base must be a batch or transaction")
	}
	var out []need
	for i, e := range b.Entry {
		if e.Request == nil {
			return nil, refusal("a batch entry has no request")
		}
		sub, err := a.entryRequest(e.Request.Method, e.Request.URL, e.Resource)
		if err != nil {
			return nil, refusal("entry " + itoa(i) + ": " + err.Error())
		}
		if e.Request.IfNoneExist != "" {
			sub.Header = http.Header{"If-None-Exist": {e.Request.IfNoneExist}}
		}
		needs, err := a.classify(sub, true)
		if err != nil {
			return nil, refusal("entry " + itoa(i) + ": " + err.Error())
		}
		for j := range needs {
			needs[j].why = "entry " + itoa(i) + " " + needs[j].why
		}
		out = append(out, needs...)
	}
	return out, nil
}

// entryRequest reads a batch entry's request as a Request. Its URL is
// relative to the base, or absolute under the base.
func (a *Authorizer) entryRequest(method, raw string, resource json.RawMessage) (*Request, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, refusal("the request url is not a URL")
	}
	p := u.EscapedPath()
	if u.IsAbs() || strings.HasPrefix(p, "/") {
		rel, ok := strings.CutPrefix(p, a.base+"/")
		if !ok || a.base == "" {
			return nil, refusal("the request url is outside the FHIR base")
		}
		p = rel
	}
	var segs []string
	for s := range strings.SplitSeq(p, "/") {
		d, err := url.PathUnescape(s)
		if err != nil {
			return nil, refusal("the request url has a bad escape")
		}
		switch d {
		case "", ".":
		case "..":
			return nil, refusal("the request url has a dot segment")
		default:
			segs = append(segs, d)
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, refusal("the request url has a bad query")
	}
	req := &Request{Method: strings.ToUpper(method), Segments: segs, Query: q, Header: http.Header{}}
	if len(resource) > 0 {
		req.Body = resource
	}
	return req, nil
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

package authz

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// ErrInvalidScope is wrapped by every error of Parse and Grant: a scope
// string that is not valid syntax, or a request none of whose resource
// scopes the client allows. OAuth answers it as invalid_scope.
var ErrInvalidScope = errors.New("invalid scope")

// Context is the first part of a SMART resource scope.
type Context uint8

// Scope contexts.
const (
	// ContextPatient confines the scope to the token's patient compartment.
	ContextPatient Context = iota + 1
	// ContextUser is what the signed-in user may do.
	ContextUser
	// ContextSystem is what a machine client may do. The gate treats it
	// as ContextUser: both are bounded only by the project's tenancy.
	ContextSystem
)

// String returns "patient", "user" or "system".
func (c Context) String() string {
	switch c {
	case ContextPatient:
		return "patient"
	case ContextUser:
		return "user"
	case ContextSystem:
		return "system"
	}
	return "context(" + fmt.Sprint(uint8(c)) + ")"
}

// Perm is a set of SMART v2 permissions.
type Perm uint8

// Permissions, in SMART's required order c r u d s.
const (
	PermCreate Perm = 1 << iota
	PermRead
	PermUpdate
	PermDelete
	PermSearch

	PermAll = PermCreate | PermRead | PermUpdate | PermDelete | PermSearch
)

// permLetters is the SMART v2 order of the permission letters.
const permLetters = "cruds"

// String returns the letters of p in SMART order ("rs", "cruds").
func (p Perm) String() string {
	var b strings.Builder
	for i := 0; i < len(permLetters); i++ {
		if p&(1<<i) != 0 {
			b.WriteByte(permLetters[i])
		}
	}
	return b.String()
}

// Param is one granular restriction of a scope ("?category=laboratory").
type Param struct {
	Name, Value string
}

// Scope is one SMART resource scope.
type Scope struct {
	Context Context
	// Type is a resource type or "*".
	Type  string
	Perms Perm
	// Params are the granular restrictions, sorted; a search must carry
	// every one of them.
	Params []Param
	// text is the scope as written.
	text string
}

// String returns the scope in SMART v2 form.
func (s Scope) String() string {
	var b strings.Builder
	b.WriteString(s.Context.String())
	b.WriteByte('/')
	b.WriteString(s.Type)
	b.WriteByte('.')
	b.WriteString(s.Perms.String())
	for i, p := range s.Params {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(escapeParam(p.Name))
		b.WriteByte('=')
		b.WriteString(escapeParam(p.Value))
	}
	return b.String()
}

// escapeParam escapes only what would break the scope token or the query
// form, so system|code values stay readable.
func escapeParam(s string) string {
	if !strings.ContainsAny(s, "&=%#+ ?\"\\") {
		return s
	}
	return url.QueryEscape(s)
}

// nonResource are the scope tokens understood that grant no resource
// permission. "offline" is Medplum's spelling of offline_access; profile,
// email, phone and address are OpenID Connect's.
var nonResource = map[string]struct{}{
	"openid": {}, "profile": {}, "email": {}, "phone": {}, "address": {},
	"fhirUser": {}, "offline": {}, "offline_access": {}, "online_access": {},
	"launch": {}, "launch/patient": {}, "launch/encounter": {},
}

// Set is a parsed scope string.
type Set struct {
	// Scopes are the resource scopes.
	Scopes []Scope
	// Other are the understood non-resource tokens (openid, fhirUser, …),
	// in order.
	Other []string
	// Unknown are syntactically valid tokens this package does not know;
	// Grant never grants them.
	Unknown []string
}

// Full tells whether s holds no resource scope: such a scope string means
// full access (user/*.cruds and system/*.cruds), which is what tokens and
// clients from before scopes were enforced carry.
func (s *Set) Full() bool { return len(s.Scopes) == 0 }

// Parse parses a space-separated scope string. A token that starts with
// "patient/", "user/" or "system/" must be a valid SMART v1 or v2 resource
// scope; any token must be an RFC 6749 scope-token. Errors wrap
// ErrInvalidScope.
func Parse(scope string) (*Set, error) {
	set := &Set{}
	for _, tok := range strings.Fields(scope) {
		if err := checkToken(tok); err != nil {
			return nil, err
		}
		if _, ok := nonResource[tok]; ok {
			set.Other = append(set.Other, tok)
			continue
		}
		ctx, rest, ok := splitContext(tok)
		if !ok {
			set.Unknown = append(set.Unknown, tok)
			continue
		}
		sc, err := parseResource(ctx, rest)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %s", ErrInvalidScope, tok, err.Error())
		}
		sc.text = tok
		set.Scopes = append(set.Scopes, sc)
	}
	return set, nil
}

// checkToken applies RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ).
func checkToken(tok string) error {
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return fmt.Errorf("%w: a scope holds the character %q", ErrInvalidScope, c)
		}
	}
	return nil
}

func splitContext(tok string) (Context, string, bool) {
	switch {
	case strings.HasPrefix(tok, "patient/"):
		return ContextPatient, tok[len("patient/"):], true
	case strings.HasPrefix(tok, "user/"):
		return ContextUser, tok[len("user/"):], true
	case strings.HasPrefix(tok, "system/"):
		return ContextSystem, tok[len("system/"):], true
	}
	return 0, "", false
}

// parseResource parses "<Type|*>.<perms>[?params]".
func parseResource(ctx Context, rest string) (Scope, error) {
	sc := Scope{Context: ctx}
	query := ""
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, query = rest[:i], rest[i+1:]
		if query == "" {
			return sc, errors.New("empty granular parameters")
		}
	}
	dot := strings.IndexByte(rest, '.')
	if dot < 0 {
		return sc, errors.New("no '.' before the permissions")
	}
	sc.Type, rest = rest[:dot], rest[dot+1:]
	if sc.Type != "*" && !validTypeName(sc.Type) {
		return sc, errors.New("not a resource type or '*'")
	}
	perms, err := parsePerms(rest)
	if err != nil {
		return sc, err
	}
	sc.Perms = perms
	if query != "" {
		params, err := parseParams(query)
		if err != nil {
			return sc, err
		}
		sc.Params = params
	}
	return sc, nil
}

// validTypeName accepts a FHIR resource type name's shape (R4 and custom
// types alike): an upper-case letter then letters and digits.
func validTypeName(s string) bool {
	if s == "" || s[0] < 'A' || s[0] > 'Z' || len(s) > 64 {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// parsePerms reads v1 (read, write, *) or v2 (a non-empty subset of cruds
// in order) permissions. v1 read is rs, write is cud (SMART v2's
// equivalence table), * is cruds.
func parsePerms(s string) (Perm, error) {
	switch s {
	case "read":
		return PermRead | PermSearch, nil
	case "write":
		return PermCreate | PermUpdate | PermDelete, nil
	case "*":
		return PermAll, nil
	case "":
		return 0, errors.New("no permissions")
	}
	var p Perm
	next := 0
	for i := 0; i < len(s); i++ {
		j := strings.IndexByte(permLetters[next:], s[i])
		if j < 0 {
			return 0, errors.New("permissions must be a subset of c r u d s in that order, or read, write or *")
		}
		next += j + 1
		p |= 1 << (next - 1)
	}
	return p, nil
}

// parseParams parses granular parameters: name=value pairs, each name and
// value non-empty; sorted and deduplicated.
func parseParams(query string) ([]Param, error) {
	var out []Param
	for part := range strings.SplitSeq(query, "&") {
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			return nil, errors.New("a granular parameter has no '='")
		}
		n, err1 := url.QueryUnescape(name)
		v, err2 := url.QueryUnescape(value)
		if err1 != nil || err2 != nil || n == "" || v == "" {
			return nil, errors.New("a granular parameter is empty or badly escaped")
		}
		out = append(out, Param{Name: n, Value: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Value < out[j].Value
	})
	dedup := out[:0]
	for i, p := range out {
		if i == 0 || p != out[i-1] {
			dedup = append(dedup, p)
		}
	}
	return dedup, nil
}

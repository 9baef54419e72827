package spec

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/store"
)

// Medplum's subscription extension URLs.
const (
	ExtSupportedInteraction = "https://medplum.com/fhir/StructureDefinition/subscription-supported-interaction"
	ExtMaxAttempts          = "https://medplum.com/fhir/StructureDefinition/subscription-max-attempts"
	ExtSuccessCodes         = "https://medplum.com/fhir/StructureDefinition/subscription-success-codes"
	ExtSecret               = "https://www.medplum.com/fhir/StructureDefinition/subscription-secret"
	// ExtSecretLegacy is the secret's first URL, still read by Medplum.
	ExtSecretLegacy = "https://www.medplum.com/fhir/StructureDefinition-subscriptionSecret"
	// ExtFHIRPathCriteria is Medplum's FHIRPath criteria, which fhirgate
	// does not evaluate: a Subscription with it is refused.
	ExtFHIRPathCriteria = "https://medplum.com/fhir/StructureDefinition/fhir-path-criteria-expression"
)

// Interactions that trigger a Subscription.
const (
	Create = "create"
	Update = "update"
	Delete = "delete"
)

// Bounds of the max-attempts extension, and its default.
const (
	DefaultMaxAttempts = 3
	MaxMaxAttempts     = 18
)

// Error is a Subscription fhirgate refuses, naming the field.
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Field + ": " + e.Message }

func refuse(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Criteria is a Subscription's criteria: a resource type and the search
// parameters (possibly none) that the backend evaluates.
type Criteria struct {
	Type string
	// Query is the search part, as written (without "?"); empty means
	// every resource of Type matches.
	Query string
}

// ParseCriteria reads "Type" or "Type?params".
func ParseCriteria(s string) (Criteria, error) {
	typ, query, _ := strings.Cut(strings.TrimSpace(s), "?")
	if !fhir.IsResourceType(typ) {
		return Criteria{}, refuse("criteria", "%q does not start with a FHIR R4 resource type (expected Type or Type?search-params)", s)
	}
	if query == "" {
		return Criteria{Type: typ}, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return Criteria{}, refuse("criteria", "the search parameters of %q do not parse", s)
	}
	for name := range q {
		if name == "_id" {
			// Matching adds _id; a second one would be ambiguous.
			return Criteria{}, refuse("criteria", "the _id parameter is not supported in criteria")
		}
		if name == "" {
			return Criteria{}, refuse("criteria", "an empty search parameter name in %q", s)
		}
	}
	return Criteria{Type: typ, Query: query}, nil
}

// MatchQuery is the backend search that decides whether resource id
// matches: the criteria's parameters, _id and a count-only summary.
func (c Criteria) MatchQuery(id string) url.Values {
	q, _ := url.ParseQuery(c.Query) // checked by ParseCriteria
	if q == nil {
		q = url.Values{}
	}
	q.Set("_id", id)
	q.Set("_summary", "count")
	return q
}

// Endpoint is where a Subscription delivers: a Bot of its project or a URL.
type Endpoint struct {
	// Bot is the bot's id when the endpoint is "Bot/{id}".
	Bot string
	// URL is the webhook otherwise.
	URL string
}

// Rule is a Subscription as fhirgate evaluates it.
type Rule struct {
	ID       string
	Project  string
	Active   bool
	Criteria Criteria
	// Interactions trigger it (create, update, delete).
	Interactions []string
	Endpoint     Endpoint
	MaxAttempts  int
	// Secret signs URL deliveries (X-Signature); empty means unsigned.
	Secret string
	// Headers are channel.header split at the first ':'.
	ChannelHeaders [][2]string
	success        []codeRange
}

// Compile checks a Subscription and returns the rule it means.
func Compile(s *store.Subscription) (*Rule, error) {
	r := &Rule{ID: s.ID, Project: s.Meta.Project, Active: s.Status == "active", MaxAttempts: DefaultMaxAttempts}
	var err error
	if r.Criteria, err = ParseCriteria(s.Criteria); err != nil {
		return nil, err
	}
	if s.Channel.Type != "rest-hook" {
		return nil, refuse("channel.type", "%q is not supported; fhirgate delivers rest-hook only", s.Channel.Type)
	}
	switch s.Channel.Payload {
	case "", "application/fhir+json", "application/json":
	default:
		return nil, refuse("channel.payload", "%q is not supported; deliveries are application/fhir+json", s.Channel.Payload)
	}
	if r.Endpoint, err = parseEndpoint(s.Channel.Endpoint); err != nil {
		return nil, err
	}
	for i, h := range s.Channel.Header {
		name, value, err := SplitHeader(h)
		if err != nil {
			return nil, refuse(fmt.Sprintf("channel.header[%d]", i), "%v", err)
		}
		r.ChannelHeaders = append(r.ChannelHeaders, [2]string{name, value})
	}
	if err := r.readExtensions(s.Extension); err != nil {
		return nil, err
	}
	if len(r.Interactions) == 0 {
		r.Interactions = []string{Create, Update} // Medplum's default
	}
	return r, nil
}

func parseEndpoint(s string) (Endpoint, error) {
	if id, ok := strings.CutPrefix(s, "Bot/"); ok {
		if !store.ValidID(id) {
			return Endpoint{}, refuse("channel.endpoint", "%q is not a Bot reference", s)
		}
		return Endpoint{Bot: id}, nil
	}
	u, err := url.Parse(s)
	if s == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return Endpoint{}, refuse("channel.endpoint", "must be Bot/{id} or an http(s) URL without credentials")
	}
	return Endpoint{URL: s}, nil
}

func (r *Rule) readExtensions(exts []store.SubscriptionExtension) error {
	for i, e := range exts {
		field := fmt.Sprintf("extension[%d]", i)
		switch e.URL {
		case ExtSupportedInteraction, "http://medplum.com/fhir/StructureDefinition/subscription-supported-interaction":
			if !slices.Contains([]string{Create, Update, Delete}, e.ValueCode) {
				return refuse(field+".valueCode", "%q is not create, update or delete", e.ValueCode)
			}
			if !slices.Contains(r.Interactions, e.ValueCode) {
				r.Interactions = append(r.Interactions, e.ValueCode)
			}
		case ExtMaxAttempts:
			if e.ValueInteger == nil || *e.ValueInteger < 1 || *e.ValueInteger > MaxMaxAttempts {
				return refuse(field+".valueInteger", "max attempts must be between 1 and %d", MaxMaxAttempts)
			}
			r.MaxAttempts = int(*e.ValueInteger)
		case ExtSuccessCodes:
			codes, err := parseSuccessCodes(e.ValueString)
			if err != nil {
				return refuse(field+".valueString", "%v", err)
			}
			r.success = codes
		case ExtSecret, ExtSecretLegacy:
			if e.ValueString == "" {
				return refuse(field+".valueString", "the signing secret is empty")
			}
			if r.Secret == "" || e.URL == ExtSecret {
				r.Secret = e.ValueString
			}
		case ExtFHIRPathCriteria:
			return refuse(field, "FHIRPath criteria (%s) are not supported by fhirgate; use Type?search-params", e.URL)
		default:
			return refuse(field+".url", "extension %q is not supported on a Subscription", e.URL)
		}
	}
	return nil
}

// Triggers tells whether interaction is one the rule runs on.
func (r *Rule) Triggers(interaction string) bool { return slices.Contains(r.Interactions, interaction) }

// Succeeded tells whether a webhook's status counts as delivered: the
// success-codes extension's, else 200..399 as Medplum.
func (r *Rule) Succeeded(status int) bool {
	if len(r.success) == 0 {
		return status >= 200 && status < 400
	}
	for _, c := range r.success {
		if status >= c.lo && status <= c.hi {
			return true
		}
	}
	return false
}

type codeRange struct{ lo, hi int }

func parseSuccessCodes(s string) ([]codeRange, error) {
	var out []codeRange
	for part := range strings.SplitSeq(strings.ReplaceAll(s, " ", ""), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		l, err1 := strconv.Atoi(lo)
		h, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || l < 100 || h > 999 || l > h {
			return nil, fmt.Errorf("%q is not a status code or range (e.g. 200,201,410-600)", part)
		}
		out = append(out, codeRange{l, h})
	}
	return out, nil
}

// SplitHeader splits a channel.header literal "Name: value" at its first
// ':' (Medplum trims both sides).
func SplitHeader(h string) (name, value string, err error) {
	name, value, ok := strings.Cut(h, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || !validHeaderName(name) {
		return "", "", errors.New("must be \"Name: value\" with a valid header name")
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return "", "", errors.New("the value contains a line break")
	}
	return name, value, nil
}

func validHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return false
		}
	}
	return true
}

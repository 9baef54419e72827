package store

import (
	"fmt"
	"slices"
	"time"
)

// storable is what the store needs from a resource type beyond [Resource].
// The methods are unexported, so only this package's types qualify: a type
// from elsewhere that embeds Base is rejected with ErrUnknownType.
type storable interface {
	Resource
	// resourceType is the FHIR type name, which is also the key namespace.
	resourceType() string
	// normalize fills derived fields before validation (e.g. a
	// membership's meta.project from its project reference).
	normalize(now time.Time)
	// validate checks the resource's own fields, returning a
	// *ValidationError. It does not read the store.
	validate() error
	// references lists other resources that must exist for the write to
	// be accepted.
	references() []mustExist
	// indexes lists the resource's index keys, apart from the generic
	// project index the store adds for every resource with meta.project.
	indexes() []indexEntry
	// allowsTTL reports whether the type may be written with a TTL.
	allowsTTL() bool
}

// mustExist names a resource a write depends on.
type mustExist struct {
	field        string // JSON path reported when it is missing
	resourceType string
	id           string
}

// indexEntry is one index key of a resource.
type indexEntry struct {
	key    []byte
	unique bool
	// what describes the holder of a unique value for the conflict error,
	// e.g. `a User with email "a@b.c"`.
	what string
}

// Defaults shared through embedding; types override what they need.
func (b *Base) normalize(time.Time)     {}
func (b *Base) references() []mustExist { return nil }
func (b *Base) indexes() []indexEntry   { return nil }
func (b *Base) allowsTTL() bool         { return false }

var registry = map[string]func() storable{
	"Project":           func() storable { return new(Project) },
	"ClientApplication": func() storable { return new(ClientApplication) },
	"User":              func() storable { return new(User) },
	"ProjectMembership": func() storable { return new(ProjectMembership) },
	"Bot":               func() storable { return new(Bot) },
	"Binary":            func() storable { return new(Binary) },
	"Login":             func() storable { return new(Login) },
	"AuditEvent":        func() storable { return new(AuditEvent) },
	"JsonWebKey":        func() storable { return new(JSONWebKey) },
	"AsyncJob":          func() storable { return new(AsyncJob) },
	"Subscription":      func() storable { return new(Subscription) },
}

// NewResource returns a new, empty resource of the named type (for example
// to decode a request body into), with ResourceType set.
func NewResource(resourceType string) (Resource, error) {
	r, err := newStorable(resourceType)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// TypeOf returns the resource type of one of this package's resources,
// whether or not its resourceType field is filled in yet.
func TypeOf(r Resource) string {
	if s, ok := r.(storable); ok {
		return s.resourceType()
	}
	return r.Base().ResourceType
}

func newStorable(resourceType string) (storable, error) {
	mk, ok := registry[resourceType]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, resourceType)
	}
	r := mk()
	r.Base().ResourceType = resourceType
	return r, nil
}

// ResourceTypes returns the names of all resource types the store keeps,
// sorted.
func ResourceTypes() []string {
	names := make([]string, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// asStorable checks that r is one of this package's resource types.
func asStorable(r Resource) (storable, error) {
	s, ok := r.(storable)
	if !ok || s == nil {
		return nil, fmt.Errorf("%w: Go type %T", ErrUnknownType, r)
	}
	return s, nil
}

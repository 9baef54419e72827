package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// DefaultListLimit is the number of results List returns when Filter.Limit
// is 0.
const DefaultListLimit = 1000

// Filter selects resources for [Store.List]. Empty fields do not filter; set
// fields must all match. A field that does not apply to the listed type is
// an error rather than silently ignored.
type Filter struct {
	// Project matches meta.project (any type).
	Project string
	// Name matches a case-insensitive prefix of name (Project,
	// ClientApplication, Bot).
	Name string
	// Email matches a User's email after [NormalizeEmail] (ASCII letters
	// case-insensitively, everything else exactly).
	Email string
	// Identifier matches a Bot identifier: "system|value", "|value" (no
	// system) or "value" (any system).
	Identifier string
	// User is a user id (ProjectMembership, Login).
	User string
	// Bot is a bot id (AuditEvent).
	Bot string
	// Limit caps the number of results; 0 means DefaultListLimit.
	Limit int
}

// filterSupport lists the types each Filter field applies to (Project
// applies to all).
var filterSupport = []struct {
	field string
	get   func(Filter) string
	types []string
}{
	{"name", func(f Filter) string { return f.Name }, []string{"Project", "ClientApplication", "Bot"}},
	{"email", func(f Filter) string { return f.Email }, []string{"User"}},
	{"identifier", func(f Filter) string { return f.Identifier }, []string{"Bot"}},
	{"user", func(f Filter) string { return f.User }, []string{"ProjectMembership", "Login"}},
	{"bot", func(f Filter) string { return f.Bot }, []string{"AuditEvent"}},
}

// List returns the resources of a type matching f, ordered by id
// (AuditEvent: newest recorded first). It reads through an index when the
// filter allows one, and otherwise scans the type.
func (s *Store) List(ctx context.Context, resourceType string, f Filter) ([]Resource, error) {
	if _, err := newStorable(resourceType); err != nil {
		return nil, err
	}
	for _, fs := range filterSupport {
		if fs.get(f) != "" && !slices.Contains(fs.types, resourceType) {
			return nil, invalid(fs.field, fmt.Sprintf("is not a search parameter of %s", resourceType))
		}
	}
	if f.Limit < 0 {
		return nil, invalid("limit", "must not be negative")
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	var out []Resource
	err := s.kv.View(ctx, func(tx Txn) error {
		out = out[:0]
		l := &lister{tx: tx, typ: resourceType, f: f, limit: limit, out: &out}
		return l.run()
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", resourceType, err)
	}
	return out, nil
}

type lister struct {
	tx    Txn
	typ   string
	f     Filter
	limit int
	out   *[]Resource
}

// run picks the most selective access path, then post-filters every
// candidate with all criteria.
func (l *lister) run() error {
	f := l.f
	switch {
	case l.typ == "User" && f.Email != "":
		// matches rechecks the address: an entry written by an older
		// release may point at a user whose address only Unicode-folds to it.
		return l.point(uniqueKey(idxUserEmail, NormalizeEmail(f.Email)))
	case l.typ == "Bot" && f.Identifier != "" && f.Project != "":
		system, value, anySystem := parseIdentifierFilter(f.Identifier)
		if !anySystem {
			return l.point(uniqueKey(idxBotIdentifier, f.Project, system, value))
		}
		return l.index(indexPrefixKey(idxBotIdentifierValue, f.Project, value), false)
	case l.typ == "ProjectMembership" && f.User != "" && f.Project != "":
		return l.index(indexPrefixKey(idxMembershipProjectUser, f.Project, f.User), false)
	case l.typ == "ProjectMembership" && f.User != "":
		return l.index(indexPrefixKey(idxMembershipUser, f.User), false)
	case l.typ == "Login" && f.User != "":
		return l.index(indexPrefixKey(idxLoginUser, f.User), false)
	case l.typ == "AuditEvent" && f.Bot != "":
		return l.index(indexPrefixKey(idxAuditBotRecorded, f.Bot), true)
	case l.typ == "AuditEvent":
		return l.index(indexPrefixKey(idxAuditRecorded), true)
	case f.Project != "":
		return l.index(indexPrefixKey(projectIndex(l.typ), f.Project), false)
	default:
		return l.tx.Scan(recordTypePrefix(l.typ), false, func(_, v []byte) error {
			r, err := decodeRecord(l.typ, v)
			if err != nil {
				return err
			}
			return l.visit(r)
		})
	}
}

// point visits the resource a unique index key points at, if any.
func (l *lister) point(key []byte) error {
	id, err := l.tx.Get(key)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return l.visitID(string(id))
}

// index visits the resources of a non-unique index prefix.
func (l *lister) index(prefix []byte, reverse bool) error {
	return l.tx.Scan(prefix, reverse, func(k, _ []byte) error {
		return l.visitID(idFromIndexKey(k))
	})
}

func (l *lister) visitID(id string) error {
	r, err := readRecord(l.tx, l.typ, id)
	if errors.Is(err, ErrNotFound) {
		// The record and its index keys share a TTL, but expiry is
		// checked per key, so an index key can outlive its record by an
		// instant.
		return nil
	}
	if err != nil {
		return err
	}
	return l.visit(r)
}

func (l *lister) visit(r storable) error {
	if !matches(r, l.f) {
		return nil
	}
	*l.out = append(*l.out, r)
	if len(*l.out) >= l.limit {
		return ErrStopScan
	}
	return nil
}

// matches applies every filter criterion to r.
func matches(r storable, f Filter) bool {
	if f.Project != "" && r.Base().Meta.Project != f.Project {
		return false
	}
	switch r := r.(type) {
	case *Project:
		return hasPrefixFold(r.Name, f.Name)
	case *ClientApplication:
		return hasPrefixFold(r.Name, f.Name)
	case *Bot:
		return hasPrefixFold(r.Name, f.Name) && (f.Identifier == "" || botHasIdentifier(r, f.Identifier))
	case *User:
		return f.Email == "" || sameEmail(r.Email, f.Email)
	case *ProjectMembership:
		return f.User == "" || r.UserID() == f.User
	case *Login:
		return f.User == "" || r.UserID() == f.User
	case *AuditEvent:
		return f.Bot == "" || slices.Contains(r.BotIDs(), f.Bot)
	}
	return true
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// parseIdentifierFilter splits a FHIR token: "system|value", "|value" (no
// system) or "value" (any system).
func parseIdentifierFilter(s string) (system, value string, anySystem bool) {
	if sys, val, ok := strings.Cut(s, "|"); ok {
		return sys, val, false
	}
	return "", s, true
}

func botHasIdentifier(b *Bot, token string) bool {
	system, value, anySystem := parseIdentifierFilter(token)
	for _, id := range b.Identifier {
		if id.Value == value && (anySystem || id.System == system) {
			return true
		}
	}
	return false
}

// Get reads the resource of type T with the given id.
//
//	bot, err := store.Get[store.Bot](ctx, s, id)
func Get[T any, P interface {
	*T
	Resource
}](ctx context.Context, s *Store, id string) (P, error) {
	p := P(new(T))
	res, err := asStorable(p)
	if err != nil {
		return nil, err
	}
	if err := s.Read(ctx, res.resourceType(), id, p); err != nil {
		return nil, err
	}
	return p, nil
}

// GetInProject reads the resource of type T with id if it belongs to
// project, and answers ErrNotFound for one of another project as for a
// missing one: a project's users must not learn what other projects hold.
//
//	bot, err := store.GetInProject[store.Bot](ctx, s, pid, id)
func GetInProject[T any, P interface {
	*T
	Resource
}](ctx context.Context, s *Store, project, id string) (P, error) {
	p, err := Get[T, P](ctx, s, id)
	if err != nil {
		return nil, err
	}
	if p.Base().Meta.Project != project {
		return nil, ErrNotFound
	}
	return p, nil
}

// Search lists resources of type T matching f (see [Store.List]).
//
//	bots, err := store.Search[store.Bot](ctx, s, store.Filter{Project: pid})
func Search[T any, P interface {
	*T
	Resource
}](ctx context.Context, s *Store, f Filter) ([]P, error) {
	return listAs[T, P](func(resourceType string) ([]Resource, error) {
		return s.List(ctx, resourceType, f)
	})
}

// listAs runs list with T's resource type and types what it returns.
func listAs[T any, P interface {
	*T
	Resource
}](list func(resourceType string) ([]Resource, error)) ([]P, error) {
	res, err := asStorable(P(new(T)))
	if err != nil {
		return nil, err
	}
	rs, err := list(res.resourceType())
	if err != nil {
		return nil, err
	}
	out := make([]P, len(rs))
	for i, r := range rs {
		out[i] = r.(P)
	}
	return out, nil
}

package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kv, _ := openTestKV(t)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New(kv, Options{Now: func() time.Time { return clock }})

	p1, p2 := seedProject(t, s, "Alpha"), seedProject(t, s, "beta")
	u1, u2 := seedUser(t, s, "one@example.com"), seedUser(t, s, "two@example.com")
	m1 := seedMembership(t, s, p1, u1, "")
	m2 := seedMembership(t, s, p2, u1, "")
	m3 := seedMembership(t, s, p1, u2, "")
	b1 := seedBot(t, s, p1, "Importer", Identifier{System: "https://s", Value: "imp"})
	b2 := seedBot(t, s, p1, "exporter", Identifier{Value: "exp"})
	b3 := seedBot(t, s, p2, "importer-2", Identifier{System: "https://s", Value: "imp"})
	c1 := mustCreate(t, s, &ClientApplication{base: Base{Meta: Meta{Project: p1.ID}}, Name: "Web"})
	l1 := mustCreate(t, s, &Login{User: Reference{Reference: "User/" + u1.ID}})
	l2 := mustCreate(t, s, &Login{User: Reference{Reference: "User/" + u2.ID}})

	// Audit events for b1 at increasing times, and one for b2.
	var b1Events []string
	for i := range 3 {
		e := mustCreate(t, s, &AuditEvent{
			base:     Base{Meta: Meta{Project: p1.ID}},
			Recorded: clock.Add(time.Duration(i) * time.Minute).Format(time.RFC3339),
			Entity:   []AuditEventEntity{{What: Reference{Reference: "Bot/" + b1.ID}}},
		})
		b1Events = append(b1Events, e.ID)
	}
	e2 := mustCreate(t, s, &AuditEvent{
		Recorded: clock.Add(time.Hour).Format(time.RFC3339),
		Source:   AuditEventSource{Observer: Reference{Reference: "Bot/" + b2.ID}},
	})

	byID := func(rs ...Resource) []string {
		var ids []string
		for _, r := range rs {
			ids = append(ids, r.Base().ID)
		}
		slices.Sort(ids)
		return ids
	}
	newest := func(ids ...string) []string { slices.Reverse(ids); return ids }

	tests := []struct {
		name    string
		typ     string
		f       Filter
		want    []string
		ordered bool // want is in the expected order rather than sorted by id
	}{
		{name: "all projects", typ: "Project", want: byID(p1, p2)},
		{name: "project name prefix any case", typ: "Project", f: Filter{Name: "alp"}, want: byID(p1)},
		{name: "users by email", typ: "User", f: Filter{Email: "TWO@example.com"}, want: byID(u2)},
		{name: "users by unknown email", typ: "User", f: Filter{Email: "x@example.com"}},
		{name: "memberships of project", typ: "ProjectMembership", f: Filter{Project: p1.ID}, want: byID(m1, m3)},
		{name: "memberships of user", typ: "ProjectMembership", f: Filter{User: u1.ID}, want: byID(m1, m2)},
		{name: "memberships of user in project", typ: "ProjectMembership", f: Filter{User: u1.ID, Project: p2.ID}, want: byID(m2)},
		{name: "bots of project", typ: "Bot", f: Filter{Project: p1.ID}, want: byID(b1, b2)},
		{name: "bots by name prefix", typ: "Bot", f: Filter{Name: "import"}, want: byID(b1, b3)},
		{name: "bots by name in project", typ: "Bot", f: Filter{Name: "import", Project: p2.ID}, want: byID(b3)},
		{name: "bots by identifier in project", typ: "Bot", f: Filter{Identifier: "https://s|imp", Project: p1.ID}, want: byID(b1)},
		{name: "bots by identifier value across projects", typ: "Bot", f: Filter{Identifier: "imp"}, want: byID(b1, b3)},
		{name: "bots by identifier without system", typ: "Bot", f: Filter{Identifier: "|exp", Project: p1.ID}, want: byID(b2)},
		{name: "bots by identifier with wrong system", typ: "Bot", f: Filter{Identifier: "https://s|exp"}},
		{name: "clients of project", typ: "ClientApplication", f: Filter{Project: p1.ID}, want: byID(c1)},
		{name: "logins of user", typ: "Login", f: Filter{User: u1.ID}, want: byID(l1)},
		{name: "all logins", typ: "Login", want: byID(l1, l2)},
		{name: "audit events of bot newest first", typ: "AuditEvent", f: Filter{Bot: b1.ID}, want: newest(slices.Clone(b1Events)...), ordered: true},
		{name: "audit events limited", typ: "AuditEvent", f: Filter{Bot: b1.ID, Limit: 2}, want: newest(slices.Clone(b1Events)...)[:2], ordered: true},
		{name: "all audit events newest first", typ: "AuditEvent", want: append([]string{e2.ID}, newest(slices.Clone(b1Events)...)...), ordered: true},
		{name: "audit events of project", typ: "AuditEvent", f: Filter{Project: p1.ID}, want: newest(slices.Clone(b1Events)...), ordered: true},
		{name: "limit", typ: "Project", f: Filter{Limit: 1}, want: byID(p1, p2)[:1]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.List(ctx, tc.typ, tc.f)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			var ids []string
			for _, r := range got {
				if r.Base().ResourceType != tc.typ {
					t.Fatalf("List returned a %s", r.Base().ResourceType)
				}
				ids = append(ids, r.Base().ID)
			}
			if !tc.ordered && !slices.IsSorted(ids) {
				t.Fatalf("results not ordered by id: %v", ids)
			}
			if !slices.Equal(ids, tc.want) {
				t.Fatalf("List = %v, want %v", ids, tc.want)
			}
		})
	}

	t.Run("filter that does not apply to the type is rejected", func(t *testing.T) {
		_, err := s.List(ctx, "Bot", Filter{Email: "one@example.com"})
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "email" {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("unknown type", func(t *testing.T) {
		_, err := s.List(ctx, "Patient", Filter{})
		wantErrIs(t, err, ErrUnknownType)
	})
	t.Run("typed search", func(t *testing.T) {
		bots, err := Search[Bot](ctx, s, Filter{Project: p2.ID})
		if err != nil || len(bots) != 1 || bots[0].Name != "importer-2" {
			t.Fatalf("Search = %v, %v", bots, err)
		}
	})
}

// TestGetInProject: a resource of another project is as missing as one
// that does not exist.
func TestGetInProject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	p1, p2 := seedProject(t, s, "Alpha"), seedProject(t, s, "Beta")
	b := seedBot(t, s, p1, "Importer", Identifier{Value: "imp"})
	got, err := GetInProject[Bot](ctx, s, p1.ID, b.ID)
	if err != nil || got.ID != b.ID || got.Name != "Importer" {
		t.Fatalf("in its project: %+v, %v", got, err)
	}
	if got, err := GetInProject[Bot](ctx, s, p2.ID, b.ID); !errors.Is(err, ErrNotFound) || got != nil {
		t.Fatalf("from another project: %+v, %v; want ErrNotFound", got, err)
	}
	if _, err := GetInProject[Bot](ctx, s, p1.ID, "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing bot: %v; want ErrNotFound", err)
	}
}

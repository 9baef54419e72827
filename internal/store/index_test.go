package store

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestUserByEmail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	u := seedUser(t, s, "Alice@Example.com")

	tests := []struct {
		name    string
		email   string
		wantErr error
	}{
		{name: "exact", email: "Alice@Example.com"},
		{name: "other case", email: "alice@example.COM"},
		{name: "unknown", email: "bob@example.com", wantErr: ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.UserByEmail(ctx, tc.email)
			if tc.wantErr != nil {
				wantErrIs(t, err, tc.wantErr)
				return
			}
			if err != nil || got.ID != u.ID {
				t.Fatalf("UserByEmail = %+v, %v; want %s", got, err, u.ID)
			}
		})
	}
}

func TestEmailIndexFollowsReplaceAndDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	u := seedUser(t, s, "old@example.com")

	u.Email = "new@example.com"
	if _, err := s.Put(ctx, u, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UserByEmail(ctx, "old@example.com"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old email still found: %v", err)
	}
	if got, err := s.UserByEmail(ctx, "NEW@example.com"); err != nil || got.ID != u.ID {
		t.Fatalf("new email: %+v, %v", got, err)
	}
	// The old email is free for someone else.
	seedUser(t, s, "old@example.com")

	if err := s.Delete(ctx, "User", u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UserByEmail(ctx, "new@example.com"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted user's email still found: %v", err)
	}
	seedUser(t, s, "new@example.com")
}

func TestUniqueness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	p1, p2 := seedProject(t, s, "one"), seedProject(t, s, "two")
	u1, u2 := seedUser(t, s, "taken@example.com"), seedUser(t, s, "u2@example.com")
	seedBot(t, s, p1, "b", Identifier{System: "https://sys", Value: "v1"})
	seedMembership(t, s, p1, u1, "ext-1")

	tests := []struct {
		name     string
		r        Resource
		conflict bool
	}{
		{name: "same email other case", r: &User{Email: "TAKEN@example.com"}, conflict: true},
		{name: "bot identifier in same project", r: &Bot{base: Base{Meta: Meta{Project: p1.ID}}, Name: "x", Identifier: []Identifier{{System: "https://sys", Value: "v1"}}}, conflict: true},
		{name: "bot identifier in other project", r: &Bot{base: Base{Meta: Meta{Project: p2.ID}}, Name: "x", Identifier: []Identifier{{System: "https://sys", Value: "v1"}}}},
		{name: "bot identifier value with other system", r: &Bot{base: Base{Meta: Meta{Project: p1.ID}}, Name: "x", Identifier: []Identifier{{System: "https://other", Value: "v1"}}}},
		{name: "membership externalId in same project", r: &ProjectMembership{Project: Reference{Reference: "Project/" + p1.ID}, User: Reference{Reference: "User/" + u2.ID}, ExternalID: "ext-1"}, conflict: true},
		{name: "membership externalId in other project", r: &ProjectMembership{Project: Reference{Reference: "Project/" + p2.ID}, User: Reference{Reference: "User/" + u2.ID}, ExternalID: "ext-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Create(ctx, tc.r, PutOptions{})
			if tc.conflict {
				wantErrIs(t, err, ErrConflict)
				if tc.r.Base().ID != "" {
					t.Fatal("failed Create left an id on the resource")
				}
				return
			}
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
		})
	}

	t.Run("replacing a resource keeps its own unique values", func(t *testing.T) {
		u1.FirstName = "changed"
		if _, err := s.Put(ctx, u1, PutOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestMembershipLookups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	p1, p2 := seedProject(t, s, "one"), seedProject(t, s, "two")
	u1, u2 := seedUser(t, s, "u1@example.com"), seedUser(t, s, "u2@example.com")
	m1 := seedMembership(t, s, p1, u1, "sub-1")
	m2 := seedMembership(t, s, p1, u1, "")
	seedMembership(t, s, p2, u1, "sub-1")
	seedMembership(t, s, p1, u2, "sub-2")

	got, err := s.MembershipsByProjectUser(ctx, p1.ID, u1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !sameIDs(got, m1.ID, m2.ID) {
		t.Fatalf("MembershipsByProjectUser = %d results", len(got))
	}
	if got[0].Meta.Project != p1.ID {
		t.Fatalf("meta.project = %q, want %q", got[0].Meta.Project, p1.ID)
	}
	if none, err := s.MembershipsByProjectUser(ctx, p2.ID, u2.ID); err != nil || len(none) != 0 {
		t.Fatalf("unexpected memberships: %d, %v", len(none), err)
	}

	m, err := s.MembershipByExternalID(ctx, p1.ID, "sub-1")
	if err != nil || m.ID != m1.ID {
		t.Fatalf("MembershipByExternalID = %+v, %v", m, err)
	}
	_, err = s.MembershipByExternalID(ctx, p1.ID, "sub-9")
	wantErrIs(t, err, ErrNotFound)

	// Moving m1 to another user updates both indexes.
	m1.User = Reference{Reference: "User/" + u2.ID}
	m1.ExternalID = "sub-3"
	if _, err := s.Put(ctx, m1, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.MembershipsByProjectUser(ctx, p1.ID, u1.ID); len(got) != 1 {
		t.Fatalf("after move, user 1 has %d memberships in project 1", len(got))
	}
	if _, err := s.MembershipByExternalID(ctx, p1.ID, "sub-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old externalId still found: %v", err)
	}
	if m, err := s.MembershipByExternalID(ctx, p1.ID, "sub-3"); err != nil || m.ID != m1.ID {
		t.Fatalf("new externalId: %v", err)
	}
}

func sameIDs(ms []*ProjectMembership, ids ...string) bool {
	if len(ms) != len(ids) {
		return false
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, m := range ms {
		if !want[m.ID] {
			return false
		}
	}
	return true
}

func TestBotByIdentifier(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	p1, p2 := seedProject(t, s, "one"), seedProject(t, s, "two")
	a := seedBot(t, s, p1, "a", Identifier{System: "https://sys", Value: "a"}, Identifier{Value: "plain"})
	b := seedBot(t, s, p1, "b", Identifier{System: "https://sys", Value: "dup"})
	seedBot(t, s, p1, "c", Identifier{System: "https://other", Value: "dup"})
	seedBot(t, s, p2, "d", Identifier{System: "https://sys", Value: "a"})

	tests := []struct {
		name          string
		project       string
		system, value string
		wantID        string
		wantErr       error
	}{
		{name: "system and value", project: p1.ID, system: "https://sys", value: "a", wantID: a.ID},
		{name: "value without system matches any system", project: p1.ID, value: "a", wantID: a.ID},
		{name: "identifier without system", project: p1.ID, value: "plain", wantID: a.ID},
		{name: "wrong system", project: p1.ID, system: "https://other", value: "a", wantErr: ErrNotFound},
		{name: "exact system among duplicates", project: p1.ID, system: "https://sys", value: "dup", wantID: b.ID},
		{name: "ambiguous value", project: p1.ID, value: "dup", wantErr: ErrConflict},
		{name: "unknown value", project: p1.ID, value: "zzz", wantErr: ErrNotFound},
		{name: "other project", project: p2.ID, value: "plain", wantErr: ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.BotByIdentifier(ctx, tc.project, tc.system, tc.value)
			if tc.wantErr != nil {
				wantErrIs(t, err, tc.wantErr)
				return
			}
			if err != nil || got.ID != tc.wantID {
				t.Fatalf("BotByIdentifier = %v, %v; want %s", got, err, tc.wantID)
			}
		})
	}

	t.Run("replace drops removed identifiers", func(t *testing.T) {
		a.Identifier = []Identifier{{System: "https://sys", Value: "renamed"}}
		if _, err := s.Put(ctx, a, PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.BotByIdentifier(ctx, p1.ID, "", "plain"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("removed identifier still found: %v", err)
		}
		if got, err := s.BotByIdentifier(ctx, p1.ID, "https://sys", "renamed"); err != nil || got.ID != a.ID {
			t.Fatalf("new identifier: %v", err)
		}
		seedBot(t, s, p1, "e", Identifier{System: "https://sys", Value: "a"})
	})

	t.Run("delete drops identifiers", func(t *testing.T) {
		if err := s.Delete(ctx, "Bot", b.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.BotByIdentifier(ctx, p1.ID, "https://sys", "dup"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted bot still found: %v", err)
		}
	})
}

func TestIndexValuesWithSeparatorsDoNotCollide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	p := seedProject(t, s, "p")
	// Without escaping, both would produce the key .../a/b/c.
	seedBot(t, s, p, "one", Identifier{System: "a/b", Value: "c"})
	two := seedBot(t, s, p, "two", Identifier{System: "a", Value: "b/c"})
	got, err := s.BotByIdentifier(ctx, p.ID, "a", "b/c")
	if err != nil || got.ID != two.ID {
		t.Fatalf("BotByIdentifier = %v, %v", got, err)
	}
	seedBot(t, s, p, "three", Identifier{System: "a|b", Value: "c"})
}

func TestDeleteRefusesWhileReferenced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name   string
		seed   func(t *testing.T, s *Store, p *Project, u *User) (cleanup func())
		target string // "Project" or "User"
	}{
		{
			name: "project with membership", target: "Project",
			seed: func(t *testing.T, s *Store, p *Project, u *User) func() {
				m := seedMembership(t, s, p, u, "")
				return func() { mustDelete(t, s, "ProjectMembership", m.ID) }
			},
		},
		{
			name: "project with client", target: "Project",
			seed: func(t *testing.T, s *Store, p *Project, u *User) func() {
				c := mustCreate(t, s, &ClientApplication{base: Base{Meta: Meta{Project: p.ID}}})
				return func() { mustDelete(t, s, "ClientApplication", c.ID) }
			},
		},
		{
			name: "project with bot", target: "Project",
			seed: func(t *testing.T, s *Store, p *Project, u *User) func() {
				b := seedBot(t, s, p, "b")
				return func() { mustDelete(t, s, "Bot", b.ID) }
			},
		},
		{
			name: "user with membership", target: "User",
			seed: func(t *testing.T, s *Store, p *Project, u *User) func() {
				m := seedMembership(t, s, p, u, "")
				return func() { mustDelete(t, s, "ProjectMembership", m.ID) }
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t)
			p, u := seedProject(t, s, "p"), seedUser(t, s, "u@example.com")
			cleanup := tc.seed(t, s, p, u)
			id := p.ID
			if tc.target == "User" {
				id = u.ID
			}
			wantErrIs(t, s.Delete(ctx, tc.target, id), ErrConflict)
			cleanup()
			mustDelete(t, s, tc.target, id)
		})
	}
}

func mustDelete(t *testing.T, s *Store, typ, id string) {
	t.Helper()
	if err := s.Delete(context.Background(), typ, id); err != nil {
		t.Fatalf("deleting %s/%s: %v", typ, id, err)
	}
}

// TestAuditEventIndexes pins the keys an AuditEvent writes: the indexes its
// listings read, and no project index (written with every bot run and never
// read), while other types keep theirs.
func TestAuditEventIndexes(t *testing.T) {
	s := newTestStore(t)
	p := seedProject(t, s, "p")
	b := seedBot(t, s, p, "b")
	ev := mustCreate(t, s, &AuditEvent{
		base:   Base{Meta: Meta{Project: p.ID}},
		Entity: []AuditEventEntity{{What: Reference{Reference: "Bot/" + b.ID}}},
	})
	indexKeys := func(index string) []string {
		var keys []string
		err := s.kv.View(context.Background(), func(tx Txn) error {
			return tx.Scan(indexPrefixKey(index), false, func(k, _ []byte) error {
				keys = append(keys, string(k))
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	tests := []struct {
		index string
		want  []string
	}{
		{idxAuditRecorded, []string{string(indexKey(idxAuditRecorded, ev.ID, ev.Recorded))}},
		{idxAuditBotRecorded, []string{string(indexKey(idxAuditBotRecorded, ev.ID, b.ID, ev.Recorded))}},
		{projectIndex("AuditEvent"), nil},
		{projectIndex("Bot"), []string{string(indexKey(projectIndex("Bot"), b.ID, p.ID))}},
	}
	for _, tc := range tests {
		if got := indexKeys(tc.index); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.index, got, tc.want)
		}
	}
	got, err := s.List(context.Background(), "AuditEvent", Filter{Project: p.ID})
	if err != nil || len(got) != 1 || got[0].Base().ID != ev.ID {
		t.Fatalf("audit events of the project: %v, %v", got, err)
	}
}

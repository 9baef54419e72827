package store

import (
	"context"
	"testing"
)

// TestChangesFollowWrites checks that every kind of write moves the counter
// of its own type, and only that one.
func TestChangesFollowWrites(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	p := seedProject(t, s, "p")
	bot := seedBot(t, s, p, "b", Identifier{System: "s", Value: "v"})

	cases := []struct {
		name  string
		typ   string
		write func() error
	}{
		{"create (grouped)", "Bot", func() error {
			return s.Create(ctx, &Bot{Name: "b2", base: base{Meta: Meta{Project: p.ID}}}, PutOptions{})
		}},
		{"put", "Bot", func() error {
			bot.Name = "renamed"
			_, err := s.Put(ctx, bot, PutOptions{})
			return err
		}},
		{"create all", "AuditEvent", func() error {
			ev := &AuditEvent{Type: Coding{Code: "execute"}, Outcome: "0"}
			ev.Meta.Project = p.ID
			return s.CreateAll(ctx, []Resource{ev}, PutOptions{})
		}},
		{"delete", "Bot", func() error { return s.Delete(ctx, "Bot", bot.ID) }},
		{"project put", "Project", func() error {
			p.Secret = []ProjectSetting{{Name: "k", ValueString: "v"}}
			_, err := s.Put(ctx, p, PutOptions{})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			other := "Login"
			before, otherBefore := s.Changes(c.typ), s.Changes(other)
			if err := c.write(); err != nil {
				t.Fatal(err)
			}
			if s.Changes(c.typ) == before {
				t.Errorf("Changes(%s) did not move", c.typ)
			}
			if s.Changes(other) != otherBefore {
				t.Errorf("Changes(%s) moved on a %s write", other, c.typ)
			}
		})
	}

	before := s.Changes("Bot")
	if err := s.Create(ctx, &Bot{Name: "dup", Identifier: []Identifier{{System: "x", Value: "y"}}, base: base{Meta: Meta{Project: p.ID}}}, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if s.Changes("Bot") == before {
		t.Error("Changes(Bot) did not move on a create")
	}

	types := []string{"Bot", "Project", "Login", "Binary"}
	counts := make([]uint64, len(types))
	for i, typ := range types {
		counts[i] = s.Changes(typ)
	}
	s.Invalidate()
	for i, typ := range types {
		if s.Changes(typ) == counts[i] {
			t.Errorf("Invalidate did not move Changes(%s)", typ)
		}
	}
}

// TestRecordChangesFollowOneRecord: a record's counter moves when it is
// written, deleted or the store invalidated, not when another record of
// its type (on another counter) is written; remote topics count the same
// way, and a topic naming only the type moves every record's counter.
func TestRecordChangesFollowOneRecord(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	p := seedProject(t, s, "p")
	a, b := seedBot(t, s, p, "a"), seedBot(t, s, p, "b")
	if s.changes.bucket("Bot", a.ID) == s.changes.bucket("Bot", b.ID) {
		b = seedBot(t, s, p, "c") // one chance in 4096: take another
	}
	ra, rb := s.RecordChanges("Bot", a.ID), s.RecordChanges("Bot", b.ID)
	a.Name = "renamed"
	if _, err := s.Put(ctx, a, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if s.RecordChanges("Bot", a.ID) == ra {
		t.Error("a Put did not move its record's counter")
	}
	if s.RecordChanges("Bot", b.ID) != rb {
		t.Error("a Put moved another record's counter")
	}

	ra = s.RecordChanges("Bot", a.ID)
	s.remoteChanges([]string{"Bot/" + b.ID})
	if s.RecordChanges("Bot", b.ID) == rb || s.RecordChanges("Bot", a.ID) != ra {
		t.Error("a remote record topic did not move exactly its record's counter")
	}
	rb = s.RecordChanges("Bot", b.ID)
	s.remoteChanges([]string{"Bot"})
	if s.RecordChanges("Bot", a.ID) == ra || s.RecordChanges("Bot", b.ID) == rb {
		t.Error("a remote type topic did not move every record's counter")
	}
	login := s.RecordChanges("Login", "x")
	s.remoteChanges(nil)
	if s.RecordChanges("Login", "x") == login {
		t.Error("a remote 'everything changed' did not move a record's counter")
	}
	ra = s.RecordChanges("Bot", a.ID)
	if err := s.Delete(ctx, "Bot", a.ID); err != nil {
		t.Fatal(err)
	}
	if s.RecordChanges("Bot", a.ID) == ra {
		t.Error("a Delete did not move its record's counter")
	}
}

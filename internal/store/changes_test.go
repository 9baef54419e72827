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

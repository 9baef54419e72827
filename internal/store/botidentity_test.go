package store

import (
	"context"
	"testing"
)

// TestMigrateBotIdentity: bots stored before the migration are marked
// runAsUser, once; bots created afterwards keep the default, and a second
// run changes nothing.
func TestMigrateBotIdentity(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	p := &Project{Name: "P"}
	p.ID = "p"
	if _, err := s.Put(ctx, p, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	newBot := func(name string) *Bot {
		t.Helper()
		b := &Bot{Name: name}
		b.Meta.Project = "p"
		if err := s.Create(ctx, b, PutOptions{}); err != nil {
			t.Fatal(err)
		}
		return b
	}
	old := newBot("old")
	changes := s.Changes("Bot")
	if n, err := s.MigrateBotIdentity(ctx); err != nil || n != 1 {
		t.Fatalf("migrated %d, %v; want 1", n, err)
	}
	got, err := Get[Bot](ctx, s, old.ID)
	if err != nil || !got.RunAsUser || got.Meta.VersionID != old.Meta.VersionID {
		t.Fatalf("the old bot after the migration: %+v, %v", got, err)
	}
	if s.Changes("Bot") == changes {
		t.Error("the migration did not invalidate cached bots")
	}
	fresh := newBot("new")
	if n, err := s.MigrateBotIdentity(ctx); err != nil || n != 0 {
		t.Fatalf("a second migration rewrote %d bots (%v)", n, err)
	}
	if got, _ := Get[Bot](ctx, s, fresh.ID); got.RunAsUser {
		t.Error("a bot created after the migration runs as its caller")
	}
}

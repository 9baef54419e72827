package store

import (
	"context"
	"fmt"
	"strings"
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

// TestMigrateBotIdentityManyBots: a store holding more bots than one
// transaction can rewrite (over Badger's ~314 KB) is migrated in several,
// every bot once, and the marker is written only when none is left.
func TestMigrateBotIdentityManyBots(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	p := seedProject(t, s, "P")
	// 1,200 bots of about 400 bytes each: about 480 KB of records, so at
	// least 7 transactions of botIdentityBatchBytes.
	const bots = 1200
	description := strings.Repeat("a bot stored before bot identity ", 8)
	for i := 0; i < bots; i += 200 {
		batch := make([]Resource, 0, 200)
		for j := i; j < i+200; j++ {
			b := &Bot{Name: fmt.Sprintf("bot%04d", j), Description: description}
			b.Meta.Project = p.ID
			batch = append(batch, b)
		}
		if err := s.CreateAll(ctx, batch, PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.MigrateBotIdentity(ctx)
	if err != nil || n != bots {
		t.Fatalf("migrated %d bots, %v; want %d", n, err, bots)
	}
	seen := 0
	err = s.kv.View(ctx, func(tx Txn) error {
		return tx.Scan(recordTypePrefix("Bot"), false, func(_, v []byte) error {
			r, err := decodeRecord("Bot", v)
			if err != nil {
				return err
			}
			if !r.(*Bot).RunAsUser {
				return fmt.Errorf("Bot/%s was not migrated", r.(*Bot).ID)
			}
			seen++
			return nil
		})
	})
	if err != nil || seen != bots {
		t.Fatalf("%d migrated bots stored, %v", seen, err)
	}
	if n, err := s.MigrateBotIdentity(ctx); err != nil || n != 0 {
		t.Fatalf("a second migration rewrote %d bots (%v)", n, err)
	}
}

// TestMigrateBotIdentityResumes: a bot stored behind the resume point
// while the migration was between transactions (by a replica of an older
// release) is migrated by the final pass before the marker is written.
func TestMigrateBotIdentityResumes(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	p := seedProject(t, s, "P")
	newBot := func(id string) {
		t.Helper()
		b := &Bot{Name: id}
		b.ID, b.Meta.Project = id, p.ID
		if _, err := s.Put(ctx, b, PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	newBot("b")
	newBot("c")
	// A pass that stopped after Bot/b, as one that reached its size bound
	// there would, then Bot/a, before the resume point, written meanwhile.
	first, err := s.migrateBotIdentityPass(ctx, nil)
	if err != nil || !first.done || first.migrated != 2 {
		t.Fatalf("first pass: %+v, %v", first, err)
	}
	if err := s.kv.Update(ctx, func(tx Txn) error { return tx.Delete(botIdentityMarker) }); err != nil {
		t.Fatal(err)
	}
	newBot("a")
	newBot("d")
	resumed, err := s.migrateBotIdentityPass(ctx, recordKey("Bot", "b"))
	if err != nil || resumed.done || resumed.resume != nil || resumed.migrated != 1 {
		t.Fatalf("the pass after Bot/b: %+v, %v; want Bot/d migrated and no marker", resumed, err)
	}
	final, err := s.migrateBotIdentityPass(ctx, nil)
	if err != nil || !final.done || final.migrated != 1 {
		t.Fatalf("the final pass: %+v, %v; want Bot/a migrated and the marker", final, err)
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		if got, err := Get[Bot](ctx, s, id); err != nil || !got.RunAsUser {
			t.Errorf("Bot/%s after the migration: %+v, %v", id, got, err)
		}
	}
}

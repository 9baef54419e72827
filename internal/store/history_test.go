package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestBotHistoryKeepsBoundedPriorVersions(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	p := seedProject(t, s, "p")
	bot := seedBot(t, s, p, "v0")
	versions := []string{bot.Meta.VersionID}
	for i := 1; i <= BotVersionsKept+3; i++ {
		bot.Name = fmt.Sprintf("v%d", i)
		if _, err := s.Put(ctx, bot, PutOptions{}); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, bot.Meta.VersionID)
	}
	hist, err := HistoryOf[Bot](ctx, s, bot.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != BotVersionsKept+1 {
		t.Fatalf("%d versions, want the current one and %d prior", len(hist), BotVersionsKept)
	}
	for i, h := range hist {
		want := len(versions) - 1 - i
		if h.Meta.VersionID != versions[want] || h.Name != fmt.Sprintf("v%d", want) {
			t.Fatalf("history[%d] is %s %q, want version %d (newest first)", i, h.Meta.VersionID, h.Name, want)
		}
	}
	// Other types keep none.
	if h, err := s.History(ctx, "Project", p.ID); err != nil || len(h) != 1 {
		t.Fatalf("Project history %d, %v; want the current version only", len(h), err)
	}
	if err := s.Delete(ctx, "Bot", bot.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := HistoryOf[Bot](ctx, s, bot.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("history of a deleted bot: %v, want not found", err)
	}
	left := 0
	if err := s.KV().View(ctx, func(tx Txn) error {
		return tx.Scan(historyPrefixKey("Bot", bot.ID), false, func(_, _ []byte) error { left++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d prior versions left after the delete", left)
	}
}

package deploy

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

func newBot(t *testing.T) (*store.Store, string) {
	t.Helper()
	st := storetest.Open(t)
	ctx := context.Background()
	p := &store.Project{Name: "P"}
	p.ID = "p"
	if _, err := st.Put(ctx, p, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	bot := &store.Bot{Name: "b"}
	bot.Meta.Project = "p"
	if err := st.Create(ctx, bot, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	return st, bot.ID
}

func TestDeployStoresSourceAndCompiledCode(t *testing.T) {
	st, id := newBot(t)
	ctx := context.Background()
	src := "export async function handler(m: unknown, e: { input: string }): Promise<string> { return e.input; }"
	bot, err := Deploy(ctx, st, id, "dir/index.ts", src)
	if err != nil {
		t.Fatal(err)
	}
	if bot.SourceCode.Title != "index.ts" || bot.SourceCode.ContentType != "application/typescript" ||
		bot.ExecutableCode.Title != "index.js" || bot.ExecutableCode.ContentType != "text/javascript" {
		t.Fatalf("attachments %+v %+v", bot.SourceCode, bot.ExecutableCode)
	}
	code, filename, err := Source(ctx, st, bot)
	if err != nil || code != src || filename != "index.ts" {
		t.Fatalf("Source = %q, %q, %v", code, filename, err)
	}
	js, key, err := Executable(ctx, st, bot)
	if err != nil || !strings.Contains(js, "handler") || strings.Contains(js, "Promise<string>") || key == "" {
		t.Fatalf("Executable = %q, %q, %v", js, key, err)
	}

	// The same source again changes nothing; a new source replaces the
	// code and removes the old Binaries.
	again, err := Deploy(ctx, st, id, "index.ts", src)
	if err != nil || again.ExecutableCode.URL != bot.ExecutableCode.URL || again.Meta.VersionID != bot.Meta.VersionID {
		t.Fatalf("redeploying the same source changed the bot: %+v, %v", again.ExecutableCode, err)
	}
	next, err := Deploy(ctx, st, id, "index.js", "exports.handler = async () => 2;")
	if err != nil || next.ExecutableCode.URL == bot.ExecutableCode.URL {
		t.Fatalf("new source: %+v, %v", next.ExecutableCode, err)
	}
	for _, a := range []*store.Attachment{bot.SourceCode, bot.ExecutableCode} {
		oldID := strings.TrimPrefix(a.URL, "Binary/")
		if _, err := store.Get[store.Binary](ctx, st, oldID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("old %s still stored: %v", a.URL, err)
		}
	}
}

func TestDeployErrors(t *testing.T) {
	st, id := newBot(t)
	ctx := context.Background()
	tests := []struct {
		name, bot, file, code string
		status                int
		contains              string
	}{
		{"unknown bot", "nope", "index.ts", "export const handler = () => 1;", http.StatusNotFound, "not found"},
		{"syntax error names line and column", id, "index.ts", "const a = 1;\nexport const handler = ( => 1;", http.StatusBadRequest, "index.ts:2:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Deploy(ctx, st, tt.bot, tt.file, tt.code)
			var derr *Error
			if !errors.As(err, &derr) || derr.HTTPStatus() != tt.status || !strings.Contains(derr.Error(), tt.contains) {
				t.Fatalf("err = %v, want status %d mentioning %q", err, tt.status, tt.contains)
			}
		})
	}
	bot, _ := store.Get[store.Bot](ctx, st, id)
	if _, _, err := Executable(ctx, st, bot); !errors.Is(err, ErrNoCode) {
		t.Fatalf("a bot never deployed: %v", err)
	}
}

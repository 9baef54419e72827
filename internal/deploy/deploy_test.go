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
	c := newCompiler(t)
	bot, err := Deploy(ctx, st, c, id, "dir/index.ts", src)
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
	again, err := Deploy(ctx, st, c, id, "index.ts", src)
	if err != nil || again.ExecutableCode.URL != bot.ExecutableCode.URL || again.Meta.VersionID != bot.Meta.VersionID {
		t.Fatalf("redeploying the same source changed the bot: %+v, %v", again.ExecutableCode, err)
	}
	next, err := Deploy(ctx, st, c, id, "index.js", "exports.handler = async () => 2;")
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
	c := newCompiler(t)
	tests := []struct {
		name, bot, file, code string
		compiler              Compiler
		status                int
		contains              string
	}{
		{"unknown bot", "nope", "index.ts", "export const handler = () => 1;", c, http.StatusNotFound, "not found"},
		{"syntax error names line and column", id, "index.ts", "const a = 1;\nexport const handler = ( => 1;", c, http.StatusBadRequest, "index.ts:2:"},
		{"compiler crash", id, "index.js", "exports.handler = () => " + strings.Repeat("[", 300_000) + strings.Repeat("]", 300_000), c, http.StatusBadRequest, "nested too deeply"},
		{"compiles busy", id, "index.js", "exports.handler = () => 1", busyCompiler{}, http.StatusTooManyRequests, "too many bot compiles"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Deploy(ctx, st, tt.compiler, tt.bot, tt.file, tt.code)
			var derr *Error
			if !errors.As(err, &derr) || derr.HTTPStatus() != tt.status || !strings.Contains(derr.Error(), tt.contains) {
				t.Fatalf("err = %v, want status %d mentioning %q", err, tt.status, tt.contains)
			}
			if tt.status == http.StatusTooManyRequests && derr.RetryAfter <= 0 {
				t.Fatalf("a 429 without Retry-After: %+v", derr)
			}
		})
	}
	bot, _ := store.Get[store.Bot](ctx, st, id)
	if _, _, err := Executable(ctx, st, bot); !errors.Is(err, ErrNoCode) {
		t.Fatalf("a bot never deployed: %v", err)
	}
}

// TestNewCodeAndSameSource: the records NewCode builds are what Deploy
// stores (Binaries in the bot's project, attachments pointing at them,
// index.ts → index.js), each call with fresh ids; SameSource recognises the
// deployed source and filename and nothing else.
func TestNewCodeAndSameSource(t *testing.T) {
	st, id := newBot(t)
	ctx := context.Background()
	comp := newCompiler(t)
	src := "export async function handler() { return 1; }"
	js, err := Compile(ctx, comp, "p", "dir/index.ts", src)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCode("p", "dir/index.ts", src, js)
	if c.Source.ID == "" || c.Source.ID == c.Executable.ID || NewCode("p", "index.ts", src, js).Source.ID == c.Source.ID {
		t.Fatalf("ids: %q %q", c.Source.ID, c.Executable.ID)
	}
	if c.SourceCode.URL != "Binary/"+c.Source.ID || c.SourceCode.Title != "index.ts" || c.SourceCode.ContentType != "application/typescript" ||
		c.ExecutableCode.URL != "Binary/"+c.Executable.ID || c.ExecutableCode.Title != "index.js" || c.ExecutableCode.ContentType != "text/javascript" ||
		c.Source.Meta.Project != "p" || c.Executable.Meta.Project != "p" {
		t.Fatalf("code records: %+v %+v %+v %+v", c.SourceCode, c.ExecutableCode, c.Source, c.Executable)
	}
	bot, err := Deploy(ctx, st, comp, id, "index.ts", src)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		filename, code string
		want           bool
	}{{"dir/index.ts", src, true}, {"index.js", src, false}, {"index.ts", src + " ", false}} {
		if same, err := SameSource(ctx, st, bot, tt.filename, tt.code); err != nil || same != tt.want {
			t.Errorf("SameSource(%q): %v, %v; want %v", tt.filename, same, err, tt.want)
		}
	}
	if ids := CodeBinaries(bot); len(ids) != 2 || "Binary/"+ids[0] != bot.SourceCode.URL || "Binary/"+ids[1] != bot.ExecutableCode.URL {
		t.Fatalf("CodeBinaries: %v", ids)
	}
	if _, err := Compile(ctx, comp, "p", "index.ts", "export function ("); err == nil {
		t.Fatal("bad code compiled")
	} else if e := (*Error)(nil); !errors.As(err, &e) || e.Status != 400 {
		t.Fatalf("compile error: %v", err)
	}
}

// TestDeployRefusesAnUnknownRuntime: a bot stored before runtimeVersion was checked (with
// "fhirgate", say) cannot take a deploy, which would write it back: 400 naming the runtimes.
func TestDeployRefusesAnUnknownRuntime(t *testing.T) {
	st, id := newBot(t)
	ctx := context.Background()
	// Rewrite the stored record as an older gateway wrote it.
	err := st.KV().Update(ctx, func(tx store.Txn) error {
		var key, val []byte
		if err := tx.Scan(nil, false, func(k, v []byte) error {
			if strings.Contains(string(k), id) && strings.Contains(string(v), `"resourceType":"Bot"`) {
				key, val = k, v
				return store.ErrStopScan
			}
			return nil
		}); err != nil {
			return err
		}
		if key == nil {
			return errors.New("the bot's record was not found")
		}
		return tx.Set(key, []byte(strings.Replace(string(val), `"name":"b"`, `"name":"b","runtimeVersion":"fhirgate"`, 1)), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	st.Invalidate()
	if bot, err := store.Get[store.Bot](ctx, st, id); err != nil || bot.RuntimeVersion != "fhirgate" {
		t.Fatalf("rewritten bot: %+v, %v", bot, err)
	}
	_, err = Deploy(ctx, st, newCompiler(t), id, "index.js", "exports.handler = () => 1")
	var derr *Error
	if !errors.As(err, &derr) || derr.Status != http.StatusBadRequest || !strings.Contains(derr.Message, "awslambda, vmcontext") {
		t.Fatalf("deploy to a bot with runtimeVersion fhirgate: %v", err)
	}
}

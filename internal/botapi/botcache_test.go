package botapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/deploy"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// countingKV counts read transactions, to see which runs read the store.
type countingKV struct {
	store.KV
	views atomic.Int64
}

func (k *countingKV) View(ctx context.Context, fn func(store.Txn) error) error {
	k.views.Add(1)
	return k.KV.View(ctx, fn)
}

type botFixture struct {
	api *API
	st  *store.Store
	kv  *countingKV
}

func newBotFixture(t testing.TB) *botFixture {
	t.Helper()
	db := storetest.OpenKV(t)
	kv := &countingKV{KV: db}
	st := store.New(kv, store.Options{})
	api, err := New(Options{Store: st, Runner: botrunner.New(botrunner.Options{}), Compiler: newCompiler(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		api.Shutdown()
	})
	return &botFixture{api: api, st: st, kv: kv}
}

// execute POSTs {} to target as the identity and returns status and body.
func (f *botFixture) execute(t *testing.T, id *oauth.Identity, target string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(`{}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	op := f.api.Handler(targetOf(r))
	if op == nil {
		t.Fatalf("%s is not a bot operation", target)
	}
	op(w, r, id, nil)
	return w.Code, w.Body.String()
}

// TestResolvedBotsFollowWrites runs a bot repeatedly while its Bot and
// Project records change: repeated runs do not read the store, and every
// write shows in the next run.
func TestResolvedBotsFollowWrites(t *testing.T) {
	ctx := context.Background()
	f := newBotFixture(t)
	project := &store.Project{Name: "p", Secret: []store.ProjectSetting{{Name: "S", ValueString: "one"}}}
	other := &store.Project{Name: "other"}
	for _, p := range []*store.Project{project, other} {
		if err := f.st.Create(ctx, p, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bot := &store.Bot{Name: "echo", Identifier: []store.Identifier{{System: "sys", Value: "one"}}}
	bot.Meta.Project = project.ID
	if err := f.st.Create(ctx, bot, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	const code = `exports.handler = async (m, e) => ({ secret: e.secrets.S ? e.secrets.S.valueString : null, bot: e.bot.display });`
	if _, err := deploy.Deploy(ctx, f.st, f.api.o.Compiler, bot.ID, "index.js", code); err != nil {
		t.Fatal(err)
	}
	caller := &oauth.Identity{ProjectID: project.ID}
	stranger := &oauth.Identity{ProjectID: other.ID}
	byIdent := func(v string) string { return "/fhir/R4/Bot/$execute?identifier=sys%7C" + v }
	byID := "/fhir/R4/Bot/" + bot.ID + "/$execute"
	reload := func(t *testing.T) *store.Bot {
		b, err := store.Get[store.Bot](ctx, f.st, bot.ID)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	steps := []struct {
		name   string
		before func(t *testing.T)
		caller *oauth.Identity
		target string
		status int
		want   map[string]any
	}{
		{name: "by identifier", caller: caller, target: byIdent("one"), status: 200, want: map[string]any{"secret": "one", "bot": "echo"}},
		{name: "by id", caller: caller, target: byID, status: 200, want: map[string]any{"secret": "one", "bot": "echo"}},
		{name: "another project's caller after the owner's runs", caller: stranger, target: byID, status: 404},
		{name: "another project's caller by identifier", caller: stranger, target: byIdent("one"), status: 404},
		{name: "project secret changed", before: func(t *testing.T) {
			p, err := store.Get[store.Project](ctx, f.st, project.ID)
			if err != nil {
				t.Fatal(err)
			}
			p.Secret[0].ValueString = "two"
			if _, err := f.st.Put(ctx, p, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}, caller: caller, target: byIdent("one"), status: 200, want: map[string]any{"secret": "two", "bot": "echo"}},
		{name: "bot renamed", before: func(t *testing.T) {
			b := reload(t)
			b.Name = "renamed"
			if _, err := f.st.Put(ctx, b, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}, caller: caller, target: byID, status: 200, want: map[string]any{"secret": "two", "bot": "renamed"}},
		{name: "identifier changed: the new one", before: func(t *testing.T) {
			b := reload(t)
			b.Identifier[0].Value = "two"
			if _, err := f.st.Put(ctx, b, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}, caller: caller, target: byIdent("two"), status: 200, want: map[string]any{"secret": "two", "bot": "renamed"}},
		{name: "identifier changed: the old one", caller: caller, target: byIdent("one"), status: 404},
		{name: "bot deleted", before: func(t *testing.T) {
			if err := f.st.Delete(ctx, "Bot", bot.ID); err != nil {
				t.Fatal(err)
			}
		}, caller: caller, target: byID, status: 404},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.before != nil {
				s.before(t)
			}
			status, body := f.execute(t, s.caller, s.target)
			if status != s.status {
				t.Fatalf("status %d, want %d: %s", status, s.status, body)
			}
			if s.want == nil {
				return
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			for k, v := range s.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v (body %s)", k, got[k], v, body)
				}
			}
			// The same run again is answered without reading the store.
			views := f.kv.views.Load()
			if status, body := f.execute(t, s.caller, s.target); status != s.status {
				t.Fatalf("repeated: status %d: %s", status, body)
			}
			if n := f.kv.views.Load() - views; n != 0 {
				t.Errorf("a repeated run read the store %d times", n)
			}
		})
	}
}

// BenchmarkFindBot is the bot lookup of a run by identifier: from the cache,
// and from the store when every lookup follows a write (cache useless).
func BenchmarkFindBot(b *testing.B) {
	ctx := context.Background()
	f := newBotFixture(b)
	project := &store.Project{Name: "p", Secret: []store.ProjectSetting{{Name: "S", ValueString: "x"}}}
	if err := f.st.Create(ctx, project, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	bot := &store.Bot{Name: "echo", Identifier: []store.Identifier{{System: "sys", Value: "echo"}}}
	bot.Meta.Project = project.ID
	if err := f.st.Create(ctx, bot, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	caller := &oauth.Identity{ProjectID: project.ID}
	r := httptest.NewRequest(http.MethodPost, "/fhir/R4/Bot/$execute?identifier=sys%7Cecho", nil)
	find := func(b *testing.B) {
		if found, ferr := f.api.findBot(ctx, caller, botKey{identifiers: r.URL.Query()["identifier"]}); found == nil {
			b.Fatalf("%d %s", ferr.Status, ferr.Message)
		}
	}
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			find(b)
		}
	})
	b.Run("uncached", func(b *testing.B) {
		for b.Loop() {
			f.st.Invalidate()
			find(b)
		}
	})
}

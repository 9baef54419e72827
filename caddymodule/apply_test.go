package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/botapi"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
)

const (
	echoBot   = "export async function handler(m: unknown, e: { input: unknown }) { return e.input; }\n"
	shoutBot  = "export async function handler(m: unknown, e: { input: string }) { return String(e.input).toUpperCase(); }\n"
	brokenBot = "export async function handler(m: unknown, e: { input: unknown } {\n"
)

// writeFile writes content to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// snapshot is every key and value of the store, the strictest "nothing
// changed" there is: records, versions, indexes, jobs. Only the cron
// scan's jobs are left out: a started app's queue enqueues one each minute
// by the clock, whatever config is being loaded beside it.
func snapshot(t *testing.T, st *store.Store) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := st.KV().View(context.Background(), func(tx store.Txn) error {
		return tx.Scan(nil, false, func(k, v []byte) error {
			m[string(k)] = string(v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	// The job queue's keys (internal/queue/kvqueue/keys.go) end with the
	// job's id, but for its unique keys, which name the kind.
	scans := map[string]bool{}
	for k, v := range m {
		var job struct {
			Kind string `json:"kind"`
		}
		if id, ok := strings.CutPrefix(k, "w/j/"); ok && json.Unmarshal([]byte(v), &job) == nil && job.Kind == botapi.CronScanKind {
			scans[id] = true
		}
	}
	for k := range m {
		if strings.HasPrefix(k, "w/u/"+botapi.CronScanKind+"/") || (strings.HasPrefix(k, "w/") && scans[k[strings.LastIndexByte(k, '/')+1:]]) {
			delete(m, k)
		}
	}
	return m
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range after {
		if old, ok := before[k]; !ok {
			t.Errorf("%s: key %q appeared", what, k)
		} else if old != v {
			t.Errorf("%s: key %q changed", what, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("%s: key %q disappeared", what, k)
		}
	}
}

// loadApp provisions an App over dir as Caddy does for a config load; start
// also runs Start. It returns the app (cleaned up with the test) or the
// load's error.
func loadApp(t *testing.T, dir string, projects map[string]*ProjectConfig, start bool) (*App, error) {
	t.Helper()
	return loadAppConfig(t, &App{StorageDir: dir, BotIsolation: isolationInProcess, Projects: projects}, start)
}

// loadAppConfig provisions a as Caddy does for a config load, and starts
// it when start is set; see loadApp.
func loadAppConfig(t *testing.T, a *App, start bool) (*App, error) {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	err := a.Provision(ctx)
	if err == nil && start {
		err = a.Start()
	}
	if err != nil {
		_ = a.Cleanup()
		cancel()
		return nil, err
	}
	t.Cleanup(func() {
		_ = a.Cleanup()
		cancel()
	})
	return a, nil
}

// TestConfigLoadIsAllOrNothing loads a config with a user and a bot, then
// reloads over the same store (the first config still holding it, as during
// `caddy reload`): a config whose second bot does not compile is refused
// and leaves every key of the store as it was; a valid config that is
// provisioned but never started (`caddy validate`) writes nothing; started,
// it writes everything.
func TestConfigLoadIsAllOrNothing(t *testing.T) {
	dir, src := t.TempDir(), t.TempDir()
	echo := writeFile(t, src, "echo.ts", echoBot)
	shout := writeFile(t, src, "shout.ts", shoutBot)
	broken := writeFile(t, src, "broken.ts", brokenBot)
	first := map[string]*ProjectConfig{"p": {
		Users: map[string]*UserConfig{"ann@example.com": {Profile: "Practitioner/ann"}},
		Bots:  map[string]*BotConfig{"a": {Source: echo, Identifiers: []string{"https://example.com/bots|a"}}},
	}}
	old, err := loadApp(t, dir, first, true)
	if err != nil {
		t.Fatal(err)
	}
	st := old.Store()
	before := snapshot(t, st)
	if len(before) == 0 {
		t.Fatal("the first load wrote nothing")
	}

	changed := func(b *BotConfig) map[string]*ProjectConfig {
		return map[string]*ProjectConfig{"p": {
			Name:  "Renamed",
			Users: map[string]*UserConfig{"ann@example.com": {Profile: "Practitioner/ann", Admin: true}, "bob@example.com": {Profile: "Practitioner/bob"}},
			Bots:  map[string]*BotConfig{"a": {Source: shout, Identifiers: []string{"https://example.com/bots|a"}}, "b": b},
		}}
	}
	if _, err := loadApp(t, dir, changed(&BotConfig{Source: broken}), true); err == nil || !strings.Contains(err.Error(), "bot b") {
		t.Fatalf("load with a broken bot: %v, want an error naming bot b", err)
	}
	sameSnapshot(t, "refused load", before, snapshot(t, st))
	if _, err := loadApp(t, dir, changed(&BotConfig{AuditEventTrigger: "sometimes"}), true); err == nil || !strings.Contains(err.Error(), "bot b: invalid audit_event_trigger") {
		t.Fatalf("load with a bad trigger: %v", err)
	}
	if _, err := loadApp(t, dir, changed(&BotConfig{Identifiers: []string{"https://example.com/bots|" + strings.Repeat("x", store.MaxIndexedLength+1)}}), true); err == nil {
		t.Fatal("a bot identifier the store refuses was accepted")
	}
	sameSnapshot(t, "refused loads", before, snapshot(t, st))

	good := changed(&BotConfig{Source: echo})
	if _, err := loadApp(t, dir, good, false); err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, "provisioned, not started", before, snapshot(t, st))

	if _, err := loadApp(t, dir, good, true); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := store.Get[store.Project](ctx, st, "p")
	if err != nil || p.Name != "Renamed" {
		t.Fatalf("project after the load: %+v, %v", p, err)
	}
	for _, name := range []string{"a", "b"} {
		bot, err := store.Get[store.Bot](ctx, st, declaredID("bot", "p", name))
		if err != nil || bot.ExecutableCode == nil {
			t.Fatalf("bot %s after the load: %+v, %v", name, bot, err)
		}
	}
	if _, err := st.UserByEmail(ctx, "bob@example.com"); err != nil {
		t.Fatal(err)
	}
	// The same config again changes nothing.
	again := snapshot(t, st)
	if _, err := loadApp(t, dir, good, true); err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, "unchanged reload", again, snapshot(t, st))
}

// TestValidateWritesNothingToANewStore: provisioning a config with
// declarations on an empty storage directory — what `caddy validate` does —
// writes no key, not even the first signing key; starting it writes them.
func TestValidateWritesNothingToANewStore(t *testing.T) {
	dir, src := t.TempDir(), t.TempDir()
	projects := map[string]*ProjectConfig{"p": {
		Users: map[string]*UserConfig{"ann@example.com": {Profile: "Practitioner/ann"}},
		Bots:  map[string]*BotConfig{"a": {Source: writeFile(t, src, "echo.ts", echoBot)}},
	}}
	a, err := loadApp(t, dir, projects, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := snapshot(t, a.Store()); len(got) != 0 {
		t.Fatalf("provisioning wrote %d keys", len(got))
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	keys, err := store.Search[store.JSONWebKey](context.Background(), a.Store(), store.Filter{})
	if err != nil || len(keys) != 1 || keys[0].ID != a.tokens.SigningKeyID() {
		t.Fatalf("signing keys after Start: %d, %v", len(keys), err)
	}
	if _, err := a.Store().UserByEmail(context.Background(), "ann@example.com"); err != nil {
		t.Fatal(err)
	}
}

// faultKV fails the n-th key set by a transaction: a write that dies half
// way through applying the declared records.
type faultKV struct {
	store.KV
	failAt int
}

var errInjected = errors.New("injected write failure")

func (f *faultKV) Update(ctx context.Context, fn func(store.Txn) error) error {
	return f.KV.Update(ctx, func(tx store.Txn) error {
		return fn(&faultTxn{Txn: tx, failAt: f.failAt})
	})
}

type faultTxn struct {
	store.Txn
	failAt, sets int
}

func (t *faultTxn) Set(key, value []byte, ttl time.Duration) error {
	if t.sets++; t.sets == t.failAt {
		return errInjected
	}
	return t.Txn.Set(key, value, ttl)
}

// TestWriteDeclaredFailingMidwayLeavesTheOldRecords: whichever key of the
// declared records' write fails, the store keeps the old records exactly;
// then the write goes through whole.
func TestWriteDeclaredFailingMidwayLeavesTheOldRecords(t *testing.T) {
	kv, err := badgerkv.Open(badgerkv.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	st := store.New(kv, store.Options{})
	src := t.TempDir()
	a := &App{compiler: testCompiler(t), logger: zap.NewNop()}
	ctx := context.Background()
	// The checks run on the healthy store, the write on the given one.
	load := func(w *store.Store, p *ProjectConfig) error {
		a.Projects = map[string]*ProjectConfig{"p": p}
		d, err := a.checkDeclared(ctx, st)
		if err != nil {
			return err
		}
		return a.writeDeclared(ctx, w, d, nil)
	}
	if err := load(st, &ProjectConfig{
		Users: map[string]*UserConfig{"ann@example.com": {Profile: "Practitioner/ann"}},
		Bots:  map[string]*BotConfig{"a": {Source: writeFile(t, src, "echo.ts", echoBot)}},
	}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, st)
	next := &ProjectConfig{
		Name:  "Renamed",
		Users: map[string]*UserConfig{"ann@example.com": {Profile: "Practitioner/ann", Admin: true}, "bob@example.com": {Profile: "Practitioner/bob"}},
		Bots:  map[string]*BotConfig{"a": {Source: writeFile(t, src, "shout.ts", shoutBot)}, "b": {Source: writeFile(t, src, "echo2.ts", echoBot)}},
	}
	for _, failAt := range []int{1, 3, 8, 15} {
		t.Run(fmt.Sprint(failAt), func(t *testing.T) {
			faulty := store.New(&faultKV{KV: kv, failAt: failAt}, store.Options{})
			if err := load(faulty, next); !errors.Is(err, errInjected) {
				t.Fatalf("err = %v, want the injected failure", err)
			}
			sameSnapshot(t, "failed write", before, snapshot(t, st))
		})
	}
	if err := load(st, next); err != nil {
		t.Fatal(err)
	}
	if u, err := st.UserByEmail(ctx, "bob@example.com"); err != nil || u == nil {
		t.Fatal(err)
	}
}

// TestApplyBotAuditEventTrigger applies a declared bot's audit_event_trigger
// to the stored Bot, and refuses an unknown one naming the config key.
func TestApplyBotAuditEventTrigger(t *testing.T) {
	tests := []struct {
		trigger, want, wantErr string
	}{
		{trigger: "", want: ""},
		{trigger: "never", want: "never"},
		{trigger: "on-error", want: "on-error"},
		{trigger: "sometimes", wantErr: "bot b: invalid audit_event_trigger 'sometimes': want one of always, never, on-error, on-output"},
	}
	for _, tt := range tests {
		t.Run(tt.trigger, func(t *testing.T) {
			ctx := context.Background()
			st, ok := applyProjects(t, map[string]*ProjectConfig{"p": {Bots: map[string]*BotConfig{"b": {AuditEventTrigger: tt.trigger}}}}, tt.wantErr)
			if !ok {
				return
			}
			var bot store.Bot
			if err := st.Read(ctx, "Bot", declaredID("bot", "p", "b"), &bot); err != nil {
				t.Fatal(err)
			}
			if bot.AuditEventTrigger != tt.want {
				t.Fatalf("stored auditEventTrigger %q, want %q", bot.AuditEventTrigger, tt.want)
			}
		})
	}
}

// TestAwaitDeclared: a request that arrives before Start waits for it and
// then gets the load's outcome; one after an abandoned load is refused.
func TestAwaitDeclared(t *testing.T) {
	for _, loadErr := range []error{nil, errInjected} {
		a := &App{ready: newLoadState()}
		got := make(chan error, 1)
		go func() { got <- a.awaitDeclared(context.Background()) }()
		a.markReady(loadErr)
		if err := <-got; err != loadErr {
			t.Fatalf("waiting request: %v, want %v", err, loadErr)
		}
		a.markReady(errors.New("second outcome")) // ignored: the first one stands
		if err := a.awaitDeclared(context.Background()); err != loadErr {
			t.Fatalf("later request: %v, want %v", err, loadErr)
		}
	}
	a := &App{ready: newLoadState()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.awaitDeclared(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a request gone while waiting: %v", err)
	}
	_ = a.Cleanup()
	if err := a.awaitDeclared(context.Background()); err == nil {
		t.Fatal("a config cleaned up without Start serves")
	}
}

// TestTooManyDeclaredRecordsSaySo: a load whose new records exceed one
// store transaction is refused with an error that says so, and writes
// nothing; the same records added over two loads go in, since unchanged
// records are not written again. (Bots without code, so that the test
// compiles nothing: about 490 fit one transaction; with code, each bot
// also writes two Binaries and about 200 fit.)
func TestTooManyDeclaredRecordsSaySo(t *testing.T) {
	kv, err := badgerkv.Open(badgerkv.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	st := store.New(kv, store.Options{})
	ctx := context.Background()
	load := func(n int) error {
		bots := map[string]*BotConfig{}
		for i := range n {
			bots[fmt.Sprint("bot-", i)] = &BotConfig{Identifiers: []string{fmt.Sprint("https://example.com/bots|", i)}}
		}
		a := &App{compiler: testCompiler(t), logger: zap.NewNop(), Projects: map[string]*ProjectConfig{"p": {Bots: bots}}}
		d, err := a.checkDeclared(ctx, st)
		if err != nil {
			return err
		}
		return a.writeDeclared(ctx, st, d, nil)
	}
	err = load(800)
	if !errors.Is(err, store.ErrTxnTooBig) || !strings.Contains(err.Error(), "do not fit one store transaction") {
		t.Fatalf("800 new bots: %v", err)
	}
	if n := len(snapshot(t, st)); n != 0 {
		t.Fatalf("a refused load wrote %d keys", n)
	}
	if err := load(400); err != nil {
		t.Fatal(err)
	}
	if err := load(800); err != nil {
		t.Fatal(err)
	}
	bots, err := store.Search[store.Bot](ctx, st, store.Filter{})
	if err != nil || len(bots) != 800 {
		t.Fatalf("%d bots, %v", len(bots), err)
	}
}

// TestProvisionRefusesAConflictWithStoredRecords: a declared bot whose
// identifier a bot made through the admin API holds is refused when the
// config is provisioned — what `caddy validate` runs — not only when it
// starts, and nothing is written.
func TestProvisionRefusesAConflictWithStoredRecords(t *testing.T) {
	dir := t.TempDir()
	first := map[string]*ProjectConfig{"p": {Users: map[string]*UserConfig{"ann@example.com": {Profile: "Practitioner/ann"}}}}
	old, err := loadApp(t, dir, first, true)
	if err != nil {
		t.Fatal(err)
	}
	st := old.Store()
	other := &store.Bot{Name: "admin-made", Identifier: []store.Identifier{{System: "https://example.com/bots", Value: "taken"}}}
	other.Meta.Project = "p"
	if err := st.Create(context.Background(), other, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, st)
	next := map[string]*ProjectConfig{"p": {
		Users: map[string]*UserConfig{"ann@example.com": {Profile: "Practitioner/ann", Admin: true}},
		Bots:  map[string]*BotConfig{"b": {Identifiers: []string{"https://example.com/bots|taken"}}},
	}}
	_, err = loadApp(t, dir, next, false)
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("provisioning a taken identifier: %v", err)
	}
	sameSnapshot(t, "refused provisioning", before, snapshot(t, st))
}

// TestApplyClientKeySet: a client's idp_jwks_uri, idp_issuer and idp_audience reach the
// stored ClientApplication, a key set without an issuer is refused at load,
// naming the client, and a client naming no provider stores none.
func TestApplyClientKeySet(t *testing.T) {
	tests := []struct {
		name    string
		client  *ClientConfig
		wantErr string
	}{
		{name: "keys and userinfo", client: &ClientConfig{UserinfoURL: "https://idp.test/userinfo", IdPJWKSURI: "https://idp.test/keys", IdPIssuer: "https://idp.test/", IdPAudience: []string{"api", "spa"}}},
		{name: "keys only", client: &ClientConfig{IdPJWKSURI: "https://idp.test/keys", IdPIssuer: "https://idp.test/", IdPAudience: []string{"api"}}},
		{name: "keys without issuer", client: &ClientConfig{IdPJWKSURI: "https://idp.test/keys", IdPAudience: []string{"api"}}, wantErr: "client c: identityProvider.issuer"},
		{name: "neither: a client that only signs in as itself", client: &ClientConfig{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			st, ok := applyProjects(t, map[string]*ProjectConfig{"p": {Clients: map[string]*ClientConfig{"c": tt.client}}}, tt.wantErr)
			if !ok {
				return
			}
			c, err := store.Get[store.ClientApplication](ctx, st, "c")
			if err != nil {
				t.Fatal(err)
			}
			idp := c.IdentityProvider
			if tt.client.UserinfoURL == "" && tt.client.IdPJWKSURI == "" {
				if idp != nil {
					t.Fatalf("identity provider %+v stored for a client that names none", idp)
				}
				return
			}
			if idp.JWKSURI != tt.client.IdPJWKSURI || idp.Issuer != tt.client.IdPIssuer || !slices.Equal(idp.Audience, tt.client.IdPAudience) || idp.UserInfoURL != tt.client.UserinfoURL {
				t.Fatalf("stored identity provider %+v", idp)
			}
		})
	}
}

// applyProjects checks and writes declared projects into a new store, as a
// config load does. With wantErr it expects the check to fail with that
// text and reports false; otherwise it returns the store.
func applyProjects(t *testing.T, projects map[string]*ProjectConfig, wantErr string) (*store.Store, bool) {
	t.Helper()
	ctx := context.Background()
	st := newTestStore(t)
	a := &App{compiler: testCompiler(t), logger: zap.NewNop(), Projects: projects}
	d, err := a.checkDeclared(ctx, st)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want %q", err, wantErr)
		}
		return nil, false
	}
	if err == nil {
		err = a.writeDeclared(ctx, st, d, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return st, true
}

func TestDeclaredClientScope(t *testing.T) {
	dir := t.TempDir()
	declare := func(scope string) map[string]*ProjectConfig {
		return map[string]*ProjectConfig{"p": {Clients: map[string]*ClientConfig{
			"app": {UserinfoURL: "https://idp.example.com/userinfo", Scope: scope},
		}}}
	}
	if _, err := loadApp(t, dir, declare("openid user/Observation.cruds?x"), false); err == nil || !strings.Contains(err.Error(), "client app: scope") {
		t.Fatalf("a scope the SMART grammar refuses: %v, want an error naming client app's scope", err)
	}
	a, err := loadApp(t, dir, declare("openid offline_access patient/*.rs launch/patient"), true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := store.Get[store.ClientApplication](context.Background(), a.Store(), "app")
	if err != nil {
		t.Fatal(err)
	}
	if c.Scope != "openid offline_access patient/*.rs launch/patient" {
		t.Fatalf("stored scope %q", c.Scope)
	}
}

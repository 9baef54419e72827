package caddymodule

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
)

// declareTo checks and writes projects to st, as a config load does; it
// returns the load's error.
func declareTo(t *testing.T, st *store.Store, projects map[string]*ProjectConfig) error {
	t.Helper()
	ctx := context.Background()
	a := &App{compiler: testCompiler(t), logger: zap.NewNop(), Projects: projects}
	d, err := a.checkDeclared(ctx, st)
	if err != nil {
		return err
	}
	return a.writeDeclared(ctx, st, d, nil)
}

func newTestStore(t *testing.T) *store.Store {
	t.Helper()
	kv, err := badgerkv.Open(badgerkv.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	return store.New(kv, store.Options{})
}

// botMemberships are the scopes of the bot's memberships, by id.
func botMemberships(t *testing.T, st *store.Store, pid, botID string) map[string]string {
	t.Helper()
	ms, err := st.MembershipsByProjectUser(context.Background(), pid, "Bot/"+botID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range ms {
		out[m.ID] = m.Scope
	}
	return out
}

// TestDeclaredBotScopeAndCron: a declared bot's scope is written on its
// membership and its cron as cronString; a changed one is rewritten, a
// removed one cleared (the bot leaves the scheduled index), an unchanged
// reload writes nothing, and a membership made through the admin API is
// the one that takes the scope.
func TestDeclaredBotScopeAndCron(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	botID := declaredID("bot", "p", "b")
	declare := func(scope, cron string) map[string]*ProjectConfig {
		return map[string]*ProjectConfig{"p": {Bots: map[string]*BotConfig{"b": {Scope: scope, Cron: cron}}}}
	}
	check := func(what, wantScope, wantCron string, wantMembers int) {
		t.Helper()
		bot, err := store.Get[store.Bot](ctx, st, botID)
		if err != nil {
			t.Fatal(err)
		}
		if bot.CronString != wantCron {
			t.Errorf("%s: cronString %q, want %q", what, bot.CronString, wantCron)
		}
		scheduled, err := st.ScheduledBots(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if (len(scheduled) == 1) != (wantCron != "") {
			t.Errorf("%s: %d scheduled bots, want the bot scheduled: %v", what, len(scheduled), wantCron != "")
		}
		ms := botMemberships(t, st, "p", botID)
		if len(ms) != wantMembers {
			t.Fatalf("%s: memberships %v, want %d", what, ms, wantMembers)
		}
		for id, scope := range ms {
			if scope != wantScope {
				t.Errorf("%s: membership %s scope %q, want %q", what, id, scope, wantScope)
			}
		}
	}

	if err := declareTo(t, st, declare("", "")); err != nil {
		t.Fatal(err)
	}
	check("no scope, no cron", "", "", 0)

	if err := declareTo(t, st, declare("user/Patient.rs  user/Observation.c", "*/5 * * * *")); err != nil {
		t.Fatal(err)
	}
	check("declared", "user/Patient.rs user/Observation.c", "*/5 * * * *", 1)
	if _, ok := botMemberships(t, st, "p", botID)[declaredID("membership", "p", "Bot/"+botID)]; !ok {
		t.Fatal("the membership the config made does not have the declared id")
	}

	before := snapshot(t, st)
	if err := declareTo(t, st, declare("user/Patient.rs user/Observation.c", "*/5 * * * *")); err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, "unchanged reload", before, snapshot(t, st))

	if err := declareTo(t, st, declare("user/Patient.rs", "0 3 * * *")); err != nil {
		t.Fatal(err)
	}
	check("changed", "user/Patient.rs", "0 3 * * *", 1)

	if err := declareTo(t, st, declare("", "")); err != nil {
		t.Fatal(err)
	}
	check("removed", "", "", 1)

	// A second membership made through the admin API takes the scope too,
	// and keeps being inactive.
	inactive := false
	m := &store.ProjectMembership{Project: store.Reference{Reference: "Project/p"}, User: store.Reference{Reference: "Bot/" + botID}, Active: &inactive}
	if err := st.Create(ctx, m, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := declareTo(t, st, declare("system/Observation.c", "")); err != nil {
		t.Fatal(err)
	}
	check("with an admin-made membership", "system/Observation.c", "", 2)
	kept, err := store.Get[store.ProjectMembership](ctx, st, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if kept.IsActive() {
		t.Fatal("the admin-made membership was reactivated")
	}
}

// TestDeclaredBotRunAsUser: run_as_user sets Bot.runAsUser either way;
// without it, a new bot runs as itself and a stored bot keeps its value
// (a bot migrated to run as its caller stays so).
func TestDeclaredBotRunAsUser(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	botID := declaredID("bot", "p", "b")
	yes, no := true, false
	steps := []struct {
		what string
		set  *bool
		want bool
	}{
		{"new, unset", nil, false},
		{"true", &yes, true},
		{"unset keeps true", nil, true},
		{"false", &no, false},
		{"unset keeps false", nil, false},
	}
	for _, s := range steps {
		if err := declareTo(t, st, map[string]*ProjectConfig{"p": {Bots: map[string]*BotConfig{"b": {RunAsUser: s.set}}}}); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		bot, err := store.Get[store.Bot](ctx, st, botID)
		if err != nil {
			t.Fatal(err)
		}
		if bot.RunAsUser != s.want {
			t.Fatalf("%s: runAsUser %v, want %v", s.what, bot.RunAsUser, s.want)
		}
	}
}

// TestDeclaredBotIdentityErrors: the JSON config gets the Caddyfile's
// checks, naming the bot.
func TestDeclaredBotIdentityErrors(t *testing.T) {
	tests := []struct {
		name string
		bot  BotConfig
		want string
	}{
		{"cron with six fields", BotConfig{Cron: "0 0 3 * * *"}, `bot b: invalid cron: "0 0 3 * * *" is not a five-field cron expression`},
		{"cron descriptor", BotConfig{Cron: "@daily"}, "bot b: invalid cron"},
		{"cron time zone", BotConfig{Cron: "TZ=Europe/Paris 0 3 * * *"}, "schedules are in UTC"},
		{"scope grammar", BotConfig{Scope: "user/Patient.xyz"}, `bot b: invalid scope: "user/Patient.xyz"`},
		{"patient scope", BotConfig{Scope: "user/Patient.rs patient/Observation.c"}, "bot b: invalid scope 'user/Patient.rs patient/Observation.c': a bot has no patient context"},
		{"no resource scope", BotConfig{Scope: "openid"}, "which would be the project's full access"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newTestStore(t)
			before := snapshot(t, st)
			err := declareTo(t, st, map[string]*ProjectConfig{"p": {Bots: map[string]*BotConfig{"b": &tt.bot}}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			sameSnapshot(t, "refused load", before, snapshot(t, st))
		})
	}
}

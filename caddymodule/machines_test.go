package caddymodule

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/fhirgate/fhirgate/internal/store"
)

// TestShortAccessTokenTTLIsRefusedAtLoad: a 3-minute access_token_ttl, on
// the app or on a client, is a config error naming Medplum's
// refreshGracePeriod, unless allow_short_access_tokens is set.
func TestShortAccessTokenTTLIsRefusedAtLoad(t *testing.T) {
	short := caddy.Duration(3 * time.Minute)
	for _, tc := range []struct {
		name string
		edit func(a *App)
		want string
	}{
		{"app ttl", func(a *App) { a.AccessTokenTTL = short }, "access_token_ttl 3m0s is under 6m0s"},
		{"client ttl", func(a *App) {
			a.Projects = map[string]*ProjectConfig{"p": {Clients: map[string]*ClientConfig{"c": {Secret: "s3cret-value", AccessTokenTTL: short}}}}
		}, "project p: client c: access_token_ttl 3m0s"},
		{"allowed", func(a *App) { a.AccessTokenTTL, a.AllowShortAccessTokens = short, true }, ""},
		{"six minutes", func(a *App) { a.AccessTokenTTL = caddy.Duration(6 * time.Minute) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			a := &App{StorageDir: t.TempDir(), BotIsolation: isolationInProcess}
			tc.edit(a)
			err := a.Provision(ctx)
			defer func() { _ = a.Cleanup() }()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "refreshGracePeriod")):
				t.Fatalf("error %v, want one containing %q and naming refreshGracePeriod", err, tc.want)
			}
		})
	}
}

// TestDeclaredMachineClient: a declared client with a secret is stored
// with its secret hashed, gets a membership as itself (admin as
// declared), needs no userinfo_url, and reloading the same config
// rewrites nothing; moving the secret to retiring_secret keeps its hash.
func TestDeclaredMachineClient(t *testing.T) {
	dir := t.TempDir()
	projects := func(secret, retiring string) map[string]*ProjectConfig {
		return map[string]*ProjectConfig{"p": {Clients: map[string]*ClientConfig{
			"ci": {Secret: secret, RetiringSecret: retiring, Admin: true},
		}}}
	}
	a, err := loadApp(t, dir, projects("first-secret-value", ""), true)
	if err != nil {
		t.Fatal(err)
	}
	st := a.Store()
	ctx := context.Background()
	c, err := store.Get[store.ClientApplication](ctx, st, "ci")
	if err != nil {
		t.Fatal(err)
	}
	if !store.IsHashedSecret(c.Secret) || !store.VerifySecret(c.Secret, "first-secret-value") || c.IdentityProvider != nil {
		t.Fatalf("stored client %+v", c)
	}
	ms, err := st.MembershipsByProjectUser(ctx, "p", "ClientApplication/ci")
	if err != nil || len(ms) != 1 || !ms[0].Admin || ms[0].Profile.Reference != "ClientApplication/ci" {
		t.Fatalf("memberships %+v, %v", ms, err)
	}
	before := snapshot(t, st)
	_ = a.Cleanup()
	a, err = loadApp(t, dir, projects("first-secret-value", ""), true)
	if err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, "reloading the same config", before, snapshot(t, a.Store()))
	_ = a.Cleanup()

	a, err = loadApp(t, dir, projects("second-secret-value", "first-secret-value"), true)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := store.Get[store.ClientApplication](ctx, a.Store(), "ci")
	if err != nil {
		t.Fatal(err)
	}
	if c2.RetiringSecret != c.Secret || !store.VerifySecret(c2.Secret, "second-secret-value") {
		t.Fatalf("after rotation: secret verifies %v, retiring kept the old hash %v",
			store.VerifySecret(c2.Secret, "second-secret-value"), c2.RetiringSecret == c.Secret)
	}
}

package caddymodule

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestXcaddyRecipeMatchesGoMod fails when xcaddy.json's Caddy version and
// go.mod's drift apart: the published build recipe must build what we test.
// It also holds the recipe to one exact xcaddy release (CI installs that
// one), its equivalent_command to the fields CI builds from, and the
// build commands in the README and docs/building.md to the recipe's versions.
func TestXcaddyRecipeMatchesGoMod(t *testing.T) {
	raw, err := os.ReadFile("../xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	var recipe struct {
		XcaddyVersion     string            `json:"xcaddy_version"`
		CaddyVersion      string            `json:"caddy_version"`
		Plugins           []recipePlugin    `json:"plugins"`
		BuildFlags        []string          `json:"build_flags"`
		Env               map[string]string `json:"env"`
		EquivalentCommand string            `json:"equivalent_command"`
	}
	if err := json.Unmarshal(raw, &recipe); err != nil {
		t.Fatalf("xcaddy.json: %v", err)
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/caddyserver/caddy/v2 (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod does not require github.com/caddyserver/caddy/v2")
	}
	if got := string(m[1]); got != recipe.CaddyVersion {
		t.Fatalf("go.mod has Caddy %s but xcaddy.json builds %s", got, recipe.CaddyVersion)
	}
	module := regexp.MustCompile(`(?m)^module (\S+)`).FindSubmatch(gomod)
	if len(recipe.Plugins) == 0 || recipe.Plugins[0].Module != string(module[1]) || recipe.Plugins[0].Replace == "" {
		t.Fatalf("xcaddy.json's first plugin %+v is not this module %s, replaced by the checkout", recipe.Plugins, module[1])
	}
	// Every other plugin is a published module at the exact version go.mod
	// requires, so the xcaddy build links what the tests ran.
	for _, p := range recipe.Plugins[1:] {
		req := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(p.Module) + ` (v\S+)`).FindSubmatch(gomod)
		if req == nil || string(req[1]) != p.Version || p.Replace != "" {
			t.Errorf("xcaddy.json plugin %+v: go.mod requires %s at %q", p, p.Module, req)
		}
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(recipe.XcaddyVersion) {
		t.Fatalf("xcaddy.json pins xcaddy %q, not an exact release vX.Y.Z", recipe.XcaddyVersion)
	}
	if want := recipeCommand(recipe.Env, recipe.BuildFlags, recipe.CaddyVersion, recipe.Plugins); recipe.EquivalentCommand != want {
		t.Fatalf("xcaddy.json equivalent_command\n%s\nis not what its fields build:\n%s", recipe.EquivalentCommand, want)
	}
	// The README and docs/building.md tell users the same versions.
	for _, page := range []string{"README.md", "docs/building.md"} {
		text, err := os.ReadFile("../" + page)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"xcaddy/cmd/xcaddy@" + recipe.XcaddyVersion, "xcaddy build " + recipe.CaddyVersion + " --with"} {
			if !strings.Contains(string(text), want) {
				t.Errorf("%s does not say %q, as xcaddy.json pins", page, want)
			}
		}
	}
}

// recipePlugin is one `--with` of the recipe: this checkout (Replace) or a
// published module at an exact Version.
type recipePlugin struct {
	Module  string `json:"module"`
	Replace string `json:"replace"`
	Version string `json:"version"`
}

// recipeCommand is the xcaddy command line a recipe's fields stand for. A
// plugin with a replacement path is named at v0.0.0, so that xcaddy
// replaces it instead of asking the module proxy for it.
func recipeCommand(env map[string]string, flags []string, caddyVersion string, plugins []recipePlugin) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + env[k] + " ")
	}
	quoted := make([]string, len(flags))
	for i, f := range flags {
		quoted[i] = f
		if strings.ContainsAny(f, " \t") {
			quoted[i] = `"` + f + `"`
		}
	}
	b.WriteString("XCADDY_GO_BUILD_FLAGS='" + strings.Join(quoted, " ") + "' ")
	b.WriteString("xcaddy build " + caddyVersion)
	for _, p := range plugins {
		b.WriteString(" --with " + p.Module)
		if p.Replace != "" {
			b.WriteString("@v0.0.0=" + p.Replace)
		} else {
			b.WriteString("@" + p.Version)
		}
	}
	return b.String()
}

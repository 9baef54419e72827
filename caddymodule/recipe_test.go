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
		XcaddyVersion string `json:"xcaddy_version"`
		CaddyVersion  string `json:"caddy_version"`
		Plugins       []struct {
			Module  string `json:"module"`
			Replace string `json:"replace"`
		} `json:"plugins"`
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
	if len(recipe.Plugins) != 1 || recipe.Plugins[0].Module != string(module[1]) {
		t.Fatalf("xcaddy.json plugins %+v do not name this module %s", recipe.Plugins, module[1])
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(recipe.XcaddyVersion) {
		t.Fatalf("xcaddy.json pins xcaddy %q, not an exact release vX.Y.Z", recipe.XcaddyVersion)
	}
	if want := recipeCommand(recipe.Env, recipe.BuildFlags, recipe.CaddyVersion,
		recipe.Plugins[0].Module, recipe.Plugins[0].Replace); recipe.EquivalentCommand != want {
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

// recipeCommand is the xcaddy command line a recipe's fields stand for. A
// plugin with a replacement path is named at v0.0.0, so that xcaddy
// replaces it instead of asking the module proxy for it.
func recipeCommand(env map[string]string, flags []string, caddyVersion, module, replace string) string {
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
	b.WriteString("xcaddy build " + caddyVersion + " --with " + module)
	if replace != "" {
		b.WriteString("@v0.0.0=" + replace)
	}
	return b.String()
}

package caddymodule

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

// TestXcaddyRecipeMatchesGoMod fails when xcaddy.json's Caddy version and
// go.mod's drift apart: the published build recipe must build what we test.
func TestXcaddyRecipeMatchesGoMod(t *testing.T) {
	raw, err := os.ReadFile("../xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	var recipe struct {
		CaddyVersion string `json:"caddy_version"`
		Plugins      []struct {
			Module string `json:"module"`
		} `json:"plugins"`
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
}

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// medplumCLI runs the real @medplum/cli (pinned in medplum/package-lock.json)
// on Node 22 in its own working directory and home, so its profile and
// medplum.config.json are the test's.
type medplumCLI struct {
	node, cli string
	dir       string
	env       []string
}

func newMedplumCLI(t *testing.T, baseURL string) *medplumCLI {
	t.Helper()
	node, err := filepath.Abs(filepath.Join(medplumDir, "node_modules", "node-22", "bin", "node"))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := filepath.Abs(filepath.Join(medplumDir, "node_modules", "@medplum", "cli", "dist", "cjs", "index.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{node, cli} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is not installed: %v", p, err)
		}
	}
	dir := t.TempDir()
	return &medplumCLI{node: node, cli: cli, dir: dir,
		env: []string{"HOME=" + dir, "MEDPLUM_BASE_URL=" + baseURL + "/", "NO_COLOR=1"}}
}

// run runs `medplum args...` with extra environment and returns its output
// and error.
func (c *medplumCLI) run(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.node, append([]string{c.cli}, args...)...)
	cmd.Dir = c.dir
	cmd.Env = append(append(os.Environ(), c.env...), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("medplum %s:\n%s", strings.Join(redactTokens(args), " "), out)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("medplum %s did not finish in time", args[0])
	}
	return string(out), err
}

// must runs the CLI and fails the test unless it succeeds.
func (c *medplumCLI) must(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, err := c.run(t, env, args...)
	if err != nil {
		t.Fatalf("medplum %s: %v", args[0], err)
	}
	return out
}

func redactTokens(args []string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if i > 0 && out[i-1] == "--access-token" {
			out[i] = "<token>"
		}
	}
	return out
}

// jsonOutput decodes the JSON the CLI pretty-prints (after any log lines).
func jsonOutput(t *testing.T, out string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	return v
}

// TestMedplumCLI is issue 20 item 3: the real Medplum CLI, signed in with a
// fhirgate access token obtained by token exchange (the CLI cannot exchange
// by itself), reads and writes through the gateway and creates, saves and
// deploys a bot, whose code then runs.
func TestMedplumCLI(t *testing.T) {
	needMedplumClient(t)
	s := startMedplumStack(t)
	cli := newMedplumCLI(t, s.gateway)
	tok := s.token(t, "alpha-app", "alice-token") // alice is an admin of alpha
	signIn := []string{"--access-token", tok}

	t.Run("get", func(t *testing.T) {
		v := jsonOutput(t, cli.must(t, nil, append([]string{"get", "Patient/cli-read"}, signIn...)...))
		if v["resourceType"] != "Patient" || v["id"] != "cli-read" {
			t.Fatalf("get: %v", v)
		}
		// The same through the environment variable the CLI reads.
		v = jsonOutput(t, cli.must(t, []string{"MEDPLUM_CLIENT_ACCESS_TOKEN=" + tok}, "get", "Patient/cli-env"))
		if v["id"] != "cli-env" {
			t.Fatalf("get with MEDPLUM_CLIENT_ACCESS_TOKEN: %v", v)
		}
		r := s.backend.last()
		if r.Header.Get("Authorization") != "" || r.Header.Get("X-Fhirgate-Profile") != "Practitioner/alice" {
			t.Fatalf("backend got Authorization %q, profile %q", r.Header.Get("Authorization"), r.Header.Get("X-Fhirgate-Profile"))
		}
	})

	t.Run("post", func(t *testing.T) {
		v := jsonOutput(t, cli.must(t, nil, append([]string{"post", "Patient", `{"resourceType":"Patient","name":[{"family":"FromCLI"}]}`}, signIn...)...))
		if v["id"] != "new-1" || v["resourceType"] != "Patient" {
			t.Fatalf("post: %v", v)
		}
		if r := s.backend.last(); r.Method != "POST" || r.URL.Path != "/fhir/R4/Patient" {
			t.Fatalf("backend got %s %s", r.Method, r.URL.Path)
		}
	})

	// A bot project as `medplum bot create` expects it: TypeScript source
	// and the compiled dist the CLI deploys.
	writeFile := func(name, content string) {
		t.Helper()
		p := filepath.Join(cli.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	botCode := func(version string) (string, string) {
		return "export async function handler(_medplum: unknown, event: { input: unknown }) {\n  return { cli: '" + version + "', input: event.input };\n}\n",
			"exports.handler = async (_medplum, event) => ({ cli: '" + version + "', input: event.input });\n"
	}
	src, dist := botCode("v1")
	writeFile("src/index.ts", src)
	writeFile("dist/index.js", dist)
	execute := func(t *testing.T, botID string) map[string]any {
		t.Helper()
		r := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+botID+"/$execute", "application/json", `{"n":1}`, "Authorization", "Bearer "+tok)
		if r.status != 200 {
			t.Fatalf("$execute: %d %s", r.status, r.body)
		}
		return r.json(t)
	}

	var botID string
	t.Run("bot create", func(t *testing.T) {
		out := cli.must(t, nil, append([]string{"bot", "create", "cli-bot", "alpha", "src/index.ts", "dist/index.js"}, signIn...)...)
		m := regexp.MustCompile(`Success! Bot created: ([A-Za-z0-9-]+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no bot id in the output")
		}
		botID = m[1]
		if got := execute(t, botID); got["cli"] != "v1" {
			t.Fatalf("the created bot ran %v", got)
		}
		cfg, err := os.ReadFile(filepath.Join(cli.dir, "medplum.config.json"))
		if err != nil || !strings.Contains(string(cfg), botID) {
			t.Fatalf("medplum.config.json: %v %s", err, cfg)
		}
	})
	if botID == "" {
		t.FailNow()
	}

	t.Run("bot create as a non-admin", func(t *testing.T) {
		bob := s.token(t, "beta-app", "bob-token")
		out, err := cli.run(t, nil, "bot", "create", "no-bot", "beta", "src/index.ts", "dist/index.js", "--access-token", bob, "--no-write-config")
		if err == nil || !strings.Contains(out, "admin") {
			t.Fatalf("a non-admin created a bot: %v", err)
		}
	})

	t.Run("bot save", func(t *testing.T) {
		out := cli.must(t, nil, append([]string{"bot", "save", "cli-bot"}, signIn...)...)
		if !strings.Contains(out, "Number of bots saved: 1") || !strings.Contains(out, "Number of errors: 0") {
			t.Fatal("bot save did not save the bot")
		}
	})

	t.Run("bot deploy", func(t *testing.T) {
		src, dist := botCode("v2")
		writeFile("src/index.ts", src)
		writeFile("dist/index.js", dist)
		out := cli.must(t, []string{"MEDPLUM_CLIENT_ACCESS_TOKEN=" + tok}, "bot", "deploy", "cli-bot")
		if !strings.Contains(out, "Number of bots deployed: 1") || !strings.Contains(out, "Number of errors: 0") {
			t.Fatal("bot deploy did not deploy the bot")
		}
		if got := execute(t, botID); got["cli"] != "v2" {
			t.Fatalf("after deploy the bot ran %v", got)
		}
	})

	t.Run("Bot search has absolute fullUrls", func(t *testing.T) {
		v := jsonOutput(t, cli.must(t, nil, append([]string{"get", "fhir/R4/Bot?name=cli-bot"}, signIn...)...))
		entries, _ := v["entry"].([]any)
		if len(entries) != 1 {
			t.Fatalf("search: %v", v)
		}
		if got := entries[0].(map[string]any)["fullUrl"]; got != s.gateway+"/fhir/R4/Bot/"+botID {
			t.Fatalf("fullUrl %v, want %s", got, s.gateway+"/fhir/R4/Bot/"+botID)
		}
	})

	// The admin route was answered by the gateway, never proxied.
	s.backend.mu.Lock()
	defer s.backend.mu.Unlock()
	for _, r := range s.backend.requests {
		if strings.HasPrefix(r.URL.Path, "/admin/") {
			t.Fatalf("%s %s reached the backend", r.Method, r.URL.Path)
		}
	}
}

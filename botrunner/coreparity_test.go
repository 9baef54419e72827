package botrunner

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The pinned @medplum/core and Node.js 22, installed by `npm ci` in internal/e2e/medplum (the e2e
// tests install them on their first run).
const (
	medplumDir  = "../internal/e2e/medplum"
	medplumPkg  = medplumDir + "/node_modules/@medplum/core"
	medplumNode = medplumDir + "/node_modules/node-22/bin/node"
)

// needMedplumPackage skips when the package is not installed, except under CI.
func needMedplumPackage(t *testing.T) {
	t.Helper()
	for _, p := range []string{medplumPkg + "/package.json", medplumNode} {
		if _, err := os.Stat(p); err != nil {
			msg := "the pinned @medplum/core is not installed: run `npm ci` in internal/e2e/medplum (" + err.Error() + ")"
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// nodeCore runs script under Node 22 with `core` the pinned @medplum/core, and returns what it
// writes (skipping when the package is not installed).
func nodeCore(t *testing.T, script string) []byte {
	t.Helper()
	needMedplumPackage(t)
	dir, err := filepath.Abs(medplumDir)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "node_modules/node-22/bin/node"), "-e", "const core = require('@medplum/core');\n"+script)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	return out
}

// describeCore is what both sides compute for every export: the value for strings and numbers
// (the constants), else its type.
const describeCore = `
const out = {};
for (const k of Object.keys(core)) {
  const v = core[k];
  out[k] = typeof v === 'string' || typeof v === 'number' ? v : typeof v;
}
`

// TestCoreExportParity enumerates the exports of the pinned @medplum/core under Node and fails on
// any the sandbox lacks that docs/bots.md does not list with its reason, on any listed one the
// sandbox has after all, and on a constant or an export's type that differs.
func TestCoreExportParity(t *testing.T) {
	nodeOut := nodeCore(t, describeCore+"process.stdout.write(JSON.stringify(out))")
	var want map[string]any
	if err := json.Unmarshal(nodeOut, &want); err != nil {
		t.Fatal(err)
	}

	res := run(t, New(Options{}), `const core = require('@medplum/core');
export async function handler() {`+describeCore+`return out; }`, jsonEvent(t, `{}`))
	if res.Outcome != OutcomeSuccess {
		t.Fatalf("%v: %s", res.Outcome, res.Message)
	}
	var got map[string]any
	if err := json.Unmarshal(res.Body, &got); err != nil {
		t.Fatal(err)
	}

	documented := documentedUnavailable(t)
	var missing []string
	for name, v := range want {
		g, ok := got[name]
		switch {
		case !ok && documented[name] == "":
			missing = append(missing, name)
		case ok && documented[name] != "":
			t.Errorf("%s is listed as unavailable in docs/bots.md, but the sandbox has it", name)
		case ok && g != v:
			t.Errorf("%s: sandbox %v, @medplum/core %v", name, g, v)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the sandbox lacks %d exports of @medplum/core that docs/bots.md does not list: %s", len(missing), strings.Join(missing, ", "))
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("the sandbox exports %s, which @medplum/core does not", name)
		}
	}
	for name, reason := range documented {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/bots.md lists %s, which @medplum/core does not export", name)
		}
		if coreUnavailable[name] != reason {
			t.Errorf("docs/bots.md gives %s the reason %q, the sandbox %q", name, reason, coreUnavailable[name])
		}
	}
	if len(documented) != len(coreUnavailable) {
		t.Errorf("docs/bots.md lists %d unavailable exports, the sandbox refuses %d", len(documented), len(coreUnavailable))
	}
}

// TestCoreBundleIsThePinnedPackage checks that the bundled package (corepkg.js) is the version
// package-lock.json pins, so `go generate` was run after the last update.
func TestCoreBundleIsThePinnedPackage(t *testing.T) {
	lock, err := os.ReadFile(medplumDir + "/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	if err := json.Unmarshal(lock, &l); err != nil {
		t.Fatal(err)
	}
	if v := l.Packages["node_modules/@medplum/core"].Version; v != corePkgVersion {
		t.Errorf("package-lock.json pins @medplum/core %s, corepkg.js is %s: run go generate in botrunner", v, corePkgVersion)
	}
}

// documentedUnavailable reads the table of exports the sandbox refuses from docs/bots.md: rows of
// "| `name` | reason |" under "### @medplum/core exports not in the sandbox".
func documentedUnavailable(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("../docs/bots.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "### @medplum/core exports not in the sandbox\n"
	i := strings.Index(string(doc), heading)
	if i < 0 {
		t.Fatalf("docs/bots.md has no %q", strings.TrimSpace(heading))
	}
	section := string(doc)[i+len(heading):]
	if j := strings.Index(section, "\n#"); j >= 0 {
		section = section[:j]
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| (.+?) \\|$")
	out := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		out[m[1]] = m[2]
	}
	return out
}

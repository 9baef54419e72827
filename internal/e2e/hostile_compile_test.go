package e2e

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostileSources are bot sources that nest one construct 300,000 times. Each is under the
// $deploy size limit (8 MiB), and ten of them overflowed the Go stack of esbuild's or goja's
// parser in the gateway (`fatal error: stack overflow`, which cannot be recovered): one $deploy
// took the gateway down for every tenant.
func hostileSources() map[string]string {
	const depth = 300_000
	r := strings.Repeat
	return map[string]string{
		"parentheses":       "exports.handler = () => " + r("(", depth) + "1" + r(")", depth) + ";",
		"arrays":            "exports.handler = () => " + r("[", depth) + r("]", depth) + ";",
		"objects":           "exports.handler = () => (" + r("{a:", depth) + "1" + r("}", depth) + ");",
		"negations":         "exports.handler = () => " + r("!", depth) + "1;",
		"ternaries":         "const a = 1, b = 2;\nexports.handler = () => " + r("a?", depth) + "a" + r(":b", depth) + ";",
		"arrows":            "exports.handler = " + r("()=>", depth) + "1;",
		"blocks":            "exports.handler = () => {" + r("{", depth) + r("}", depth) + "};",
		"ifs":               "const a = 1;\nexports.handler = () => {" + r("if(a)", depth) + ";};",
		"assignments":       "let a;\nexports.handler = () => " + r("a=", depth) + "1;",
		"template literals": "exports.handler = () => " + r("`${", depth) + "1" + r("}`", depth) + ";",
		"unary minus":       "exports.handler = () => " + r("- ", depth) + "1;",
		"calls":             "const f = (x) => x;\nexports.handler = () => " + r("f(", depth) + "1" + r(")", depth) + ";",
	}
}

// TestHostileCompile deploys, through the FHIR API, source crafted against the compiler: the
// twelve nesting shapes answer 400 (the compiler's process crashed, not the gateway), and a flat
// 1+1+…+1 of 100,000 terms (~40 s of goja's compiler, which cannot be interrupted) answers 400
// naming bot_compile_timeout at the limit, having cost the gateway itself next to no CPU.
// Throughout, another project's bot runs and its user's token exchanges keep answering. Both
// isolation modes compile in a child process.
func TestHostileCompile(t *testing.T) {
	for _, isolation := range []string{"process", "inprocess"} {
		t.Run(isolation, func(t *testing.T) { hostileCompile(t, isolation) })
	}
}

func hostileCompile(t *testing.T, isolation string) {
	const limit = 3 * time.Second
	s := startStack(t, fmt.Sprintf("bot_isolation %s\n\t\tbot_compile_timeout %v", isolation, limit))
	alice := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")} // admin of alpha
	base := s.gateway + "/fhir/R4/Bot"
	r := do(t, "POST", base, "application/fhir+json", `{"resourceType":"Bot","name":"hostile"}`, alice...)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	deployURL := base + "/" + r.json(t)["id"].(string) + "/$deploy"
	deploy := func(t *testing.T, filename, code string) (response, time.Duration) {
		t.Helper()
		start := time.Now()
		r, err := try("POST", deployURL, "application/json", mustJSON(t, map[string]string{"code": code, "filename": filename}), alice...)
		if err != nil {
			t.Fatalf("deploy: no answer after %v: %v\n%s", time.Since(start), err, s.logs())
		}
		return r, time.Since(start)
	}

	// Another project's traffic, all along: a bot run and a token exchange, over and over.
	betaEcho := s.gateway + "/fhir/R4/Bot/" + s.botID(t, "beta", "https://example.com/bots|echo") + "/$execute"
	bob := []string{"Authorization", "Bearer " + s.token(t, "beta-app", "bob-token")}
	stop := make(chan struct{})
	var probes, failures atomic.Int64
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			run, err := try("POST", betaEcho, "application/json", `{}`, bob...)
			if err == nil && (run.status != 200 || !strings.Contains(string(run.body), `"ok":true`)) {
				err = fmt.Errorf("bot run: %d %s", run.status, run.body)
			}
			if err == nil {
				var ex response
				ex, _, err = s.exchange("beta-app", "bob-token")
				if err == nil && ex.status != 200 {
					err = fmt.Errorf("token exchange: %d %s", ex.status, ex.body)
				}
			}
			probes.Add(1)
			if err != nil {
				failures.Add(1)
				firstFailure.CompareAndSwap(nil, err.Error())
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
		if failures.Load() > 0 || probes.Load() == 0 {
			t.Errorf("another project's requests: %d of %d probes failed (first: %v)", failures.Load(), probes.Load(), firstFailure.Load())
			return
		}
		t.Logf("another project's requests: %d probes, all answered", probes.Load())
	}()

	// A normal bot deploys and runs: the compile process's overhead, measured.
	var took []time.Duration
	for i := range 5 {
		r, d := deploy(t, "index.ts", fmt.Sprintf("export async function handler(m: unknown, e: { input: string }): Promise<string> { return 'v%d ' + e.input }", i))
		if r.status != 200 {
			t.Fatalf("deploy of a normal bot: %d %s", r.status, r.body)
		}
		took = append(took, d)
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("deploy of a small TypeScript bot: median %v (min %v, max %v)", took[2], took[0], took[4])
	if r := do(t, "POST", strings.TrimSuffix(deployURL, "$deploy")+"$execute", "text/plain", "hi", alice...); r.status != 200 || string(r.body) != "v4 hi" {
		t.Fatalf("the deployed bot: %d %s", r.status, r.body)
	}

	shapes := hostileSources()
	names := make([]string, 0, len(shapes))
	for name := range shapes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			src := shapes[name]
			r, d := deploy(t, "index.js", src)
			if r.status != 400 || !strings.Contains(string(r.body), "OperationOutcome") || !strings.Contains(string(r.body), "compiling bot") {
				t.Fatalf("%d KiB of %s: %d after %v: %s", len(src)>>10, name, r.status, d, r.body)
			}
			if !s.alive() {
				t.Fatalf("the gateway died:\n%s", s.logs())
			}
			t.Logf("%d KiB: 400 after %v: %s", len(src)>>10, d.Round(time.Millisecond), r.body)
		})
	}

	t.Run("flat plus chain", func(t *testing.T) {
		src := "exports.handler = () => 1" + strings.Repeat("+1", 100_000-1) + ";"
		before := cpuTime(t, s.cmd.Process.Pid)
		r, d := deploy(t, "index.js", src)
		cpu := cpuTime(t, s.cmd.Process.Pid) - before
		if r.status != 400 || !strings.Contains(string(r.body), "bot_compile_timeout") || !strings.Contains(string(r.body), limit.String()) {
			t.Fatalf("%d after %v: %s", r.status, d, r.body)
		}
		t.Logf("400 after %v, gateway CPU meanwhile %v: %s", d.Round(time.Millisecond), cpu, r.body)
		// The bound the issue states: answered at the limit plus a few seconds, not after goja's
		// ~40 s; and the gateway's own CPU stays near zero (before, it spent the ~40 s itself).
		if d > limit+5*time.Second {
			t.Errorf("answered after %v with a %v limit", d, limit)
		}
		if cpu > time.Second {
			t.Errorf("the gateway spent %v of CPU during the deploy", cpu)
		}
	})
	if !s.alive() {
		t.Fatalf("the gateway died:\n%s", s.logs())
	}
}

// cpuTime is the CPU time a process has used itself (user and system; not its children's).
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Skipf("reading the gateway's CPU time: %v", err)
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)      // field 14 of proc(5)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)      // field 15
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ is 100 on Linux
}

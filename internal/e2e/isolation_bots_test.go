package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// hostileBots misbehave on purpose. Each run must end in a 400 OperationOutcome whose text
// contains one of want, within its timeout plus a few seconds, while the gateway goes on.
var hostileBots = []struct {
	name    string
	code    string
	want    []string
	timeout int // the bot's own timeout in seconds; 0: bot_timeout
}{
	// Memory bombs get time enough that the memory limit, not the deadline, must stop them.
	{"memory bomb", `exports.handler = () => { const a = []; for (;;) a.push('x'.repeat(1 << 20) + a.length) }`,
		[]string{"memory limit exceeded"}, 60},
	{"one huge string", `exports.handler = () => { const s = 'y'.repeat(1 << 30); return s.length }`,
		[]string{"memory limit exceeded"}, 60},
	{"loop", `exports.handler = () => { for (;;) {} }`,
		[]string{"bot execution timed out after 2s"}, 0},
	{"loop after await", `exports.handler = async () => { await Promise.resolve(); for (;;) {} }`,
		[]string{"bot execution timed out after 2s"}, 0},
	{"native call that never ends", `exports.handler = () => /(?=a)(a+)+b/.test('a'.repeat(40))`,
		[]string{"bot execution timed out after 2s"}, 0},
	{"deeply nested JSON.stringify", `exports.handler = () => { let a = []; for (let i = 0; i < 1e5; i++) a = [a]; return a }`,
		[]string{"bot execution timed out after 2s", "memory limit exceeded", "bot worker crashed"}, 0},
	{"deep recursion", `exports.handler = () => { const f = (n) => f(n + 1) + 1; return f(0) }`,
		[]string{"Maximum call stack size exceeded"}, 0},
	{"huge output", `exports.handler = () => 'z'.repeat(20 << 20)`,
		[]string{"bot result is 20971520 bytes, more than the limit"}, 0},
	{"console flood", `exports.handler = () => { for (let i = 0; i < 2e4; i++) console.log('w'.repeat(1000)); throw new Error('flooded') }`,
		[]string{"flooded"}, 0},
	{"read a file", `exports.handler = () => require('fs').readFileSync('/etc/passwd', 'utf8')`,
		[]string{"Cannot find module 'fs'"}, 0},
	{"read /proc through eval", `exports.handler = () => eval("require('fs').readFileSync('/proc/self/environ', 'utf8')")`,
		[]string{"Cannot find module 'fs'"}, 0},
	{"read a file through import()", `exports.handler = async () => (await import('node:fs/promises')).readFile('/proc/self/environ')`,
		[]string{"Cannot find module 'node:fs/promises'"}, 0},
	{"environment through Function", `exports.handler = () => Function('return process.env')()`,
		[]string{"process is not defined"}, 0},
	{"environment", `exports.handler = () => process.env.HOME`,
		[]string{"process is not defined"}, 0},
	// fetch exists, through the project's egress allow-list, which lists
	// nothing here (and never loopback unless named).
	{"network with fetch", `exports.handler = async () => (await fetch('http://127.0.0.1:1/')).status`,
		[]string{"egress to 127.0.0.1:1 refused: not on the project's egress allow-list"}, 0},
	{"network with net", `exports.handler = () => require('net').connect(80, '127.0.0.1')`,
		[]string{"Cannot find module 'net'"}, 0},
	{"network with XMLHttpRequest", `exports.handler = () => new XMLHttpRequest()`,
		[]string{"XMLHttpRequest is not defined"}, 0},
	{"start a process", `exports.handler = () => require('child_process').execSync('id')`,
		[]string{"Cannot find module 'child_process'"}, 0},
}

// deployBot creates a bot in alice's project, with a timeout in seconds unless 0, and deploys
// code to it.
func deployBot(t *testing.T, s *stack, auth []string, name, code string, timeout int) string {
	t.Helper()
	return deployBotFile(t, s, auth, name, "index.js", code, timeout)
}

// deployBotFile is deployBot with the filename $deploy gets (".ts" for TypeScript).
func deployBotFile(t *testing.T, s *stack, auth []string, name, filename, code string, timeout int) string {
	t.Helper()
	bot := map[string]any{"resourceType": "Bot", "name": name}
	if timeout > 0 {
		bot["timeout"] = timeout
	}
	r := do(t, "POST", s.gateway+"/fhir/R4/Bot", "application/fhir+json", mustJSON(t, bot), auth...)
	if r.status != 201 {
		t.Fatalf("create %s: %d %s", name, r.status, r.body)
	}
	id := r.json(t)["id"].(string)
	r = do(t, "POST", s.gateway+"/fhir/R4/Bot/"+id+"/$deploy", "application/json", mustJSON(t, map[string]string{"code": code, "filename": filename}), auth...)
	if r.status != 200 {
		t.Fatalf("deploy %s: %d %s", name, r.status, r.body)
	}
	return id
}

// residentMiB is a process's resident memory (VmRSS) in MiB.
func residentMiB(t *testing.T, pid int) int64 {
	t.Helper()
	return procStatusMiB(t, pid, "VmRSS")
}

// procStatusMiB is a memory field of /proc/<pid>/status in MiB.
func procStatusMiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatalf("reading the memory of %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb >> 10
		}
	}
	t.Fatalf("no %s for %d", field, pid)
	return 0
}

// botWorkers lists the live bot worker processes of the Caddy whose pid is parent.
func botWorkers(t *testing.T, parent int) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so split after its ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[0] == "Z" || fields[1] != strconv.Itoa(parent) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if strings.Contains(string(cmdline), "bot-worker") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// gone waits until none of pids is a live process.
func gone(t *testing.T, pids []int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, pid := range pids {
		for {
			stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			if err != nil || strings.Contains(string(stat), ") Z ") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("bot worker %d is still running", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestBotIsolationContainsHostileBots(t *testing.T) {
	// Project alpha may hold 6 of the 8 slots: its four misbehaving runs leave room for its echo.
	s := startStack(t, "bot_timeout 2s\n\t\tbot_isolation process\n\t\tbot_worker_memory 128MiB\n\t\tbot_project_max_concurrent 6")
	auth := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	echo := s.gateway + "/fhir/R4/Bot/" + s.botID(t, "alpha", "https://example.com/bots|echo") + "/$execute"
	execute := func(id string) string { return s.gateway + "/fhir/R4/Bot/" + id + "/$execute" }
	stillServing := func(t *testing.T) {
		t.Helper()
		if r := do(t, "POST", echo, "text/plain", "still here", auth...); r.status != 200 || string(r.body) != "still here" {
			t.Fatalf("echo: %d %s", r.status, r.body)
		}
	}
	stillServing(t)
	caddyPid := s.cmd.Process.Pid
	startRSS := residentMiB(t, caddyPid)

	ids := map[string]string{}
	for _, b := range hostileBots {
		ids[b.name] = deployBot(t, s, auth, b.name, b.code, b.timeout)
	}
	for _, b := range hostileBots {
		t.Run(b.name, func(t *testing.T) {
			start := time.Now()
			r := do(t, "POST", execute(ids[b.name]), "application/json", `{}`, auth...)
			took := time.Since(start)
			if r.status != 400 || !strings.Contains(string(r.body), `"OperationOutcome"`) {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			matched := false
			for _, w := range b.want {
				matched = matched || strings.Contains(string(r.body), w)
			}
			if !matched {
				t.Errorf("answer %s, want one of %q", r.body, b.want)
			}
			if took > 10*time.Second {
				t.Errorf("took %v", took)
			}
			stillServing(t)
			rss := residentMiB(t, caddyPid)
			t.Logf("%v, gateway RSS %d MiB: %s", took.Round(time.Millisecond), rss, r.body)
			if rss > startRSS+128 {
				t.Errorf("the gateway's RSS grew from %d to %d MiB", startRSS, rss)
			}
		})
	}

	t.Run("the sandbox has no host objects", func(t *testing.T) {
		id := deployBot(t, s, auth, "probe", `exports.handler = () => ['process', 'require', 'XMLHttpRequest', 'WebSocket', 'Deno', 'Bun', 'global']
  .filter((name) => typeof globalThis[name] !== 'undefined')`, 0)
		if r := do(t, "POST", execute(id), "application/json", `{}`, auth...); r.status != 200 || string(r.body) != "[]" {
			t.Fatalf("host objects in the sandbox: %d %s", r.status, r.body)
		}
	})
	t.Run("a URL in a medplum call reaches only the FHIR backend", func(t *testing.T) {
		id := deployBot(t, s, auth, "ssrf", `exports.handler = async (medplum) => (await medplum.get('http://169.254.169.254/latest/meta-data')).id`, 0)
		if r := do(t, "POST", execute(id), "application/json", `{}`, auth...); r.status != 200 || string(r.body) != "meta-data" {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if got := s.backend.last(); got == nil || got.URL.Path != "/fhir/R4/latest/meta-data" {
			t.Fatalf("the backend got %v", got)
		}
	})
	t.Run("other runs go on while bots misbehave", func(t *testing.T) {
		var wg sync.WaitGroup
		for _, name := range []string{"memory bomb", "loop", "native call that never ends", "memory bomb"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r := do(t, "POST", execute(ids[name]), "application/json", `{}`, auth...); r.status != 400 {
					t.Errorf("%s: %d %s", name, r.status, r.body)
				}
			}()
		}
		time.Sleep(200 * time.Millisecond)
		for range 20 {
			stillServing(t)
		}
		wg.Wait()
	})

	workers := botWorkers(t, caddyPid)
	if len(workers) == 0 {
		t.Fatal("no bot worker process found")
	}
	for _, pid := range workers {
		// The binary's pages (RssFile) are shared page cache; the cap is on the worker's own.
		// A worker killed for its bot may be gone, or a zombie without memory, by now.
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil || !strings.Contains(string(b), "RssAnon:") {
			continue
		}
		if anon := procStatusMiB(t, pid, "RssAnon"); anon > 128 {
			t.Errorf("idle worker %d holds %d MiB, over its cap", pid, anon)
		}
	}
	t.Logf("gateway RSS %d MiB at the start, %d MiB at the end; %d workers", startRSS, residentMiB(t, caddyPid), len(workers))
	s.stop()
	gone(t, workers, 10*time.Second) // a graceful stop leaves no worker behind
}

func TestBotWorkersDieWithTheGateway(t *testing.T) {
	s := startStack(t, "bot_isolation process")
	auth := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	echo := s.gateway + "/fhir/R4/Bot/" + s.botID(t, "alpha", "https://example.com/bots|echo") + "/$execute"
	if r := do(t, "POST", echo, "text/plain", "hi", auth...); r.status != 200 {
		t.Fatalf("echo: %d %s", r.status, r.body)
	}
	workers := botWorkers(t, s.cmd.Process.Pid)
	if len(workers) == 0 {
		t.Fatal("no bot worker process found")
	}
	s.kill() // SIGKILL: no Cleanup runs, the kernel's parent-death signal ends the workers
	gone(t, workers, 5*time.Second)
}

func TestInProcessHeapWatchdogStopsAMemoryBomb(t *testing.T) {
	// Caddy keeps it; the watchdog's process limit is 90% of it, and the bots' own heap budget
	// (bot_memory, 256 MiB by default) fires first.
	t.Setenv("GOMEMLIMIT", "512MiB")
	s := startStack(t, "bot_timeout 20s\n\t\tbot_isolation inprocess")
	auth := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	echo := s.gateway + "/fhir/R4/Bot/" + s.botID(t, "alpha", "https://example.com/bots|echo") + "/$execute"
	bomb := deployBot(t, s, auth, "memory bomb", hostileBots[0].code, 0)
	before := residentMiB(t, s.cmd.Process.Pid)
	start := time.Now()
	r := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+bomb+"/$execute", "application/json", `{}`, auth...)
	if r.status != 400 || !strings.Contains(string(r.body), "bot execution stopped: memory limit exceeded (running bots grew the heap by more than 256 MiB)") {
		t.Fatalf("memory bomb: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", echo, "text/plain", "still here", auth...); r.status != 200 || string(r.body) != "still here" {
		t.Fatalf("echo after the bomb: %d %s", r.status, r.body)
	}
	t.Logf("stopped after %v; gateway RSS %d MiB before, %d MiB after", time.Since(start).Round(time.Millisecond), before, residentMiB(t, s.cmd.Process.Pid))
	if err := s.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the gateway died: %v", err)
	}
}

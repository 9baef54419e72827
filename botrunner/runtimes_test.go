package botrunner

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// counterBot counts its runs in module state and in a global; console.log is captured at load
// time, so a run's console shows whether it still writes to that run's capture. A Patient id
// in the input makes it read that patient first (a medplum call, which a blocking client holds);
// {"loop":true} makes it spin until stopped.
const counterBot = `
let n = 0;
const log = console.log;
exports.handler = async (medplum, event) => {
	n++;
	globalThis.g = (globalThis.g || 0) + 1;
	log('run ' + n);
	if (event.input.loop) { for (;;) {} }
	if (event.input.read) { await medplum.readResource('Patient', event.input.read); }
	return { n, g: globalThis.g };
};`

// executors are the two isolation modes: the in-process Runner and a Pool of workers (this test
// binary), each serving runs through the same Runner code.
func executors(t *testing.T, o Options) map[string]Executor {
	return map[string]Executor{
		"inprocess": New(o),
		"process":   newTestPool(t, PoolOptions{}),
	}
}

type counterReq struct {
	runtime, project, bot, key string
	input                      string
	timeout                    time.Duration
	medplum                    MedplumClient
}

func counterRun(t *testing.T, ex Executor, code string, c counterReq) *Result {
	t.Helper()
	if c.input == "" {
		c.input = `{}`
	}
	if c.timeout == 0 {
		c.timeout = 10 * time.Second
	}
	res, err := ex.Run(ctxT(t), Request{
		CacheKey: c.key, Code: code, Runtime: c.runtime, Project: c.project, BotID: c.bot,
		Timeout: c.timeout, Event: jsonEvent(t, c.input), Medplum: c.medplum,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// count runs the counter bot and returns its module-level count (which the global agrees with).
func count(t *testing.T, ex Executor, code string, c counterReq) int {
	t.Helper()
	res := counterRun(t, ex, code, c)
	if res.Outcome != OutcomeSuccess {
		t.Fatalf("run: %s %s", res.Outcome, res.Message)
	}
	var v struct{ N, G int }
	if err := json.Unmarshal(res.Body, &v); err != nil {
		t.Fatalf("body %s: %v", res.Body, err)
	}
	if v.N != v.G {
		t.Fatalf("module count %d, global count %d: one instance keeps both or neither", v.N, v.G)
	}
	return v.N
}

func counterCode(t *testing.T) string { return mustCompile(t, "index.js", counterBot).JS }

func TestAWSLambdaKeepsModuleStateVMContextDoesNot(t *testing.T) {
	code := counterCode(t)
	for name, ex := range executors(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			for _, runtime := range []string{"", RuntimeAWSLambda} {
				key := "warm" + runtime
				for want := 1; want <= 3; want++ {
					res := counterRun(t, ex, code, counterReq{runtime: runtime, project: "p", bot: "b", key: key})
					if !strings.Contains(string(res.Body), `"n":`+string(rune('0'+want))) {
						t.Fatalf("runtime %q run %d: body %s, want n=%d", runtime, want, res.Body, want)
					}
					// The console captured at load time writes to this run's capture only.
					if want > 1 && (res.Console != "run "+string(rune('0'+want))+"\n") {
						t.Fatalf("runtime %q run %d: console %q, want only this run's line", runtime, want, res.Console)
					}
				}
			}
			for i := 0; i < 3; i++ {
				if got := count(t, ex, code, counterReq{runtime: RuntimeVMContext, project: "p", bot: "b", key: "fresh"}); got != 1 {
					t.Fatalf("vmcontext run %d counted %d, want 1 (a fresh runtime per run)", i+1, got)
				}
			}
		})
	}
}

func TestInstancesNeverCrossBotsVersionsOrProjects(t *testing.T) {
	code := counterCode(t)
	for name, ex := range executors(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			a := counterReq{project: "p1", bot: "a", key: "a@1"}
			if got := count(t, ex, code, a); got != 1 {
				t.Fatalf("first run of a: %d", got)
			}
			if got := count(t, ex, code, a); got != 2 {
				t.Fatalf("second run of a: %d, want 2", got)
			}
			for _, other := range []counterReq{
				{project: "p1", bot: "b", key: "a@1"}, // another bot, same code and key
				{project: "p2", bot: "a", key: "a@1"}, // another project
				{project: "p1", bot: "a", key: "a@2"}, // a redeploy: a new version
			} {
				if got := count(t, ex, code, other); got != 1 {
					t.Fatalf("%+v counted %d, want 1: it saw another instance's state", other, got)
				}
			}
			// The redeploy retired a@1's instance: even a late run of the old version starts fresh.
			if got := count(t, ex, code, a); got != 1 {
				t.Fatalf("a@1 after a@2 ran: %d, want 1", got)
			}
			// The same key with new code (a redeploy that kept its key) never reuses the old module.
			newCode := mustCompile(t, "index.js", counterBot+"\nexports.version = 2;").JS
			if got := count(t, ex, newCode, a); got != 1 {
				t.Fatalf("new code under the old key: %d, want 1", got)
			}
		})
	}
}

func TestStoppedInstanceIsDiscarded(t *testing.T) {
	code := counterCode(t)
	for name, ex := range executors(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			c := counterReq{project: "p", bot: "b", key: "b@1"}
			count(t, ex, code, c)
			if got := count(t, ex, code, c); got != 2 {
				t.Fatalf("second run: %d", got)
			}
			loop := c
			loop.input, loop.timeout = `{"loop":true}`, 300*time.Millisecond
			if res := counterRun(t, ex, code, loop); res.Outcome != OutcomeTimeout {
				t.Fatalf("looping run: %s %s, want a timeout", res.Outcome, res.Message)
			}
			if got := count(t, ex, code, c); got != 1 {
				t.Fatalf("run after a timeout counted %d, want 1 (a fresh instance)", got)
			}
			if got := count(t, ex, code, c); got != 2 {
				t.Fatalf("the fresh instance is kept: %d, want 2", got)
			}

			// A cancelled run's instance goes too.
			client := newBlockingClient()
			ctx, cancel := context.WithCancel(ctxT(t))
			done := make(chan *Result, 1)
			go func() {
				res, _ := ex.Run(ctx, Request{CacheKey: c.key, Code: code, Project: c.project, BotID: c.bot,
					Timeout: 10 * time.Second, Event: jsonEvent(t, `{"read":"x"}`), Medplum: client})
				done <- res
			}()
			<-client.entered
			cancel()
			<-done
			if got := count(t, ex, code, c); got != 1 {
				t.Fatalf("run after a cancelled run counted %d, want 1", got)
			}
		})
	}
}

func TestModuleTopLevelThrowsEveryTime(t *testing.T) {
	code := mustCompile(t, "index.js", `let n = 0; n++; throw new Error('top level broke ' + n); exports.handler = () => 1;`).JS
	r := New(Options{})
	for name, ex := range map[string]Executor{"inprocess": r, "process": newTestPool(t, PoolOptions{})} {
		t.Run(name, func(t *testing.T) {
			for i := 0; i < 3; i++ {
				res := counterRun(t, ex, code, counterReq{project: "p", bot: "b", key: "throws"})
				if res.Outcome != OutcomeError || res.Message != "top level broke 1" {
					t.Fatalf("run %d: %s %q, want the top level's error each time", i+1, res.Outcome, res.Message)
				}
			}
		})
	}
	if n := r.instances.idleCount(); n != 0 {
		t.Fatalf("%d instances kept of a module that never loaded", n)
	}
}

func TestOverlappingRunsUseSeparateInstances(t *testing.T) {
	code := counterCode(t)
	for name, ex := range executors(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			client := newBlockingClient()
			c := counterReq{project: "p", bot: "b", key: "b@1", input: `{"read":"x"}`, medplum: client}
			const runs = 3
			var wg sync.WaitGroup
			got := make([]int, runs)
			for i := range runs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i] = count(t, ex, code, c)
				}()
			}
			for range runs {
				<-client.entered // all three are inside their handlers at once
			}
			close(client.release)
			wg.Wait()
			for i, n := range got {
				if n != 1 {
					t.Fatalf("overlapping run %d counted %d, want 1 (an instance of its own): %v", i, n, got)
				}
			}
			// The instances were kept: the next runs continue one of them.
			if n := count(t, ex, code, c); n != 2 {
				t.Fatalf("run after the overlap counted %d, want 2", n)
			}
		})
	}
}

func TestInstanceBounds(t *testing.T) {
	code := counterCode(t)
	r := New(Options{MaxInstances: 2, MaxInstancesPerVersion: 1})
	client := newBlockingClient()
	close(client.release)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			count(t, r, code, counterReq{project: "p", bot: "a", key: "a@1", input: `{"read":"x"}`, medplum: client})
		}()
	}
	wg.Wait()
	if n := r.instances.idleCount(); n != 1 {
		t.Fatalf("%d idle instances of one version, want at most MaxInstancesPerVersion = 1", n)
	}
	count(t, r, code, counterReq{project: "p", bot: "b", key: "b@1"})
	count(t, r, code, counterReq{project: "p", bot: "c", key: "c@1"})
	if n := r.instances.idleCount(); n != 2 {
		t.Fatalf("%d idle instances, want MaxInstances = 2", n)
	}
	// a's instance was the least recently used: it went to make room for c's.
	if got := count(t, r, code, counterReq{project: "p", bot: "a", key: "a@1"}); got != 1 {
		t.Fatalf("evicted bot counted %d, want 1", got)
	}
}

func TestIdleInstancesAreReaped(t *testing.T) {
	code := counterCode(t)
	r := New(Options{InstanceIdleTimeout: 20 * time.Millisecond})
	c := counterReq{project: "p", bot: "b", key: "b@1"}
	count(t, r, code, c)
	if n := r.instances.idleCount(); n != 1 {
		t.Fatalf("%d idle instances after a run, want 1", n)
	}
	// Generous: the reaper looks every 5 ms; this waits up to 10 s for it.
	for deadline := time.Now().Add(10 * time.Second); r.instances.idleCount() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the idle instance was never reaped")
		}
	}
	loads := r.loads.Load()
	if got := count(t, r, code, c); got != 1 {
		t.Fatalf("run after reaping counted %d, want 1", got)
	}
	if r.loads.Load() != loads+1 {
		t.Fatal("the run after reaping did not load the module afresh")
	}
}

func TestUnsupportedRuntime(t *testing.T) {
	code := counterCode(t)
	for name, ex := range executors(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			res := counterRun(t, ex, code, counterReq{runtime: "fhirgate", project: "p", bot: "b", key: "b@1"})
			if res.Outcome != OutcomeError || !strings.Contains(res.Message, "unsupported bot runtime 'fhirgate'") ||
				!strings.Contains(res.Message, "awslambda and vmcontext") {
				t.Fatalf("%s %q", res.Outcome, res.Message)
			}
		})
	}
}

// TestWarmModuleStateCountsAgainstTheHeapBudget: a bot that keeps 4 MiB more in module state on
// every run is stopped once what it keeps passes the in-process heap budget, and its instance,
// with all it kept, is gone: the next run counts from 1. (Were the idle heap with warm instances
// taken as the gateway's own, the budget would follow the bot's growth and never stop it.)
func TestWarmModuleStateCountsAgainstTheHeapBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates up to ~100 MiB")
	}
	code := mustCompile(t, "index.js", `
const keep = [];
let n = 0;
exports.handler = () => {
	n++;
	keep.push(new Array(1 << 18).fill(n + 0.5));
	const t = Date.now(); while (Date.now() - t < 30) {} // long enough for the watchdog to look
	return { n, g: n };
};`).JS
	r := New(Options{HeapBudget: 24 << 20})
	c := counterReq{project: "p", bot: "b", key: "b@1"}
	stopped := 0
	for i := 1; i <= 25 && stopped == 0; i++ {
		res := counterRun(t, r, code, c)
		switch {
		case res.Outcome == OutcomeError && strings.Contains(res.Message, "memory limit exceeded"):
			stopped = i
		case res.Outcome != OutcomeSuccess:
			t.Fatalf("run %d: %s %s", i, res.Outcome, res.Message)
		}
		// As after an idle while: collections that would let the baseline follow the bot.
		runtime.GC()
		runtime.GC()
	}
	if stopped == 0 {
		t.Fatal("25 runs kept 100 MiB of module state under a 24 MiB budget and none was stopped")
	}
	if got := count(t, r, code, c); got != 1 {
		t.Fatalf("run after the memory stop counted %d, want 1", got)
	}
}

// TestStaleStopDoesNotReachTheNextRun: a warm instance's earlier run's timer (its timeout, its
// caller's context) may fire after that run ended; the instance's next run must not be stopped
// by it, nor inherit a pending interrupt.
func TestStaleStopDoesNotReachTheNextRun(t *testing.T) {
	r := New(Options{})
	x := newExecution(r, nil)
	req := &Request{}
	first, _ := x.begin(context.Background(), req, time.Second)
	x.rt = goja.New()
	x.reusable = true
	if !x.seal(first) {
		t.Fatal("a clean run's instance was not kept")
	}
	x.stopRun(first, stopTimeout) // the first run's timer, late
	second, _ := x.begin(context.Background(), req, time.Second)
	x.stopRun(first, stopTimeout)
	if x.stopped != 0 {
		t.Fatalf("the second run was stopped (%d) by the first run's timer", x.stopped)
	}
	if v, err := x.rt.RunString(`1 + 1`); err != nil || v.ToInteger() != 2 {
		t.Fatalf("the second run's runtime: %v, %v", v, err)
	}
	x.stopRun(second, stopTimeout)
	if x.stopped != stopTimeout {
		t.Fatal("the second run's own timer did not stop it")
	}
	x.reusable = true
	if x.seal(second) {
		t.Fatal("a stopped run's instance was kept")
	}
}

package botrunner

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// timerBot arms timers that would fire after the run ({"arm":true}: a timeout, an interval and
// an immediate, the run ends at once), or waits longer than those would take and reports
// whether any fired ({"wait":true}); {"spin":true} waits on an interval forever, {"throw":true}
// throws from a timer callback, {"forever":true} waits on a promise nothing settles and
// {"unref":true} on an unref'd timer only.
const timerBot = `
let runs = 0;
globalThis.fired = 0;
exports.handler = async (medplum, event) => {
  runs++;
  const i = event.input;
  if (i.arm) {
    setTimeout(() => { globalThis.fired++; console.log('timeout fired'); }, 30);
    setInterval(() => { globalThis.fired++; }, 10);
    setImmediate(() => { globalThis.fired++; });
    return { runs };
  }
  if (i.wait) {
    await new Promise((resolve) => setTimeout(resolve, 120));
    return { runs, fired: globalThis.fired };
  }
  if (i.spin) {
    await new Promise(() => setInterval(() => {}, 5));
  }
  if (i.throw) {
    await new Promise(() => setTimeout(() => { throw new TypeError('from a timer'); }, 5));
  }
  if (i.forever) {
    await new Promise(() => {});
  }
  if (i.unref) {
    await new Promise((resolve) => setTimeout(resolve, 10).unref());
  }
  return { runs };
};`

type timerAnswer struct{ Runs, Fired int }

func timerRun(t *testing.T, ex Executor, code, runtime, input string, timeout time.Duration) *Result {
	t.Helper()
	return counterRun(t, ex, code, counterReq{runtime: runtime, project: "p", bot: "timers", key: "timers@1", input: input, timeout: timeout})
}

func timerAnswerOf(t *testing.T, res *Result) timerAnswer {
	t.Helper()
	if res.Outcome != OutcomeSuccess {
		t.Fatalf("run: %s %s", res.Outcome, res.Message)
	}
	var a timerAnswer
	if err := json.Unmarshal(res.Body, &a); err != nil {
		t.Fatalf("body %s: %v", res.Body, err)
	}
	return a
}

// TestTimersEndWithTheRun: the timers a run leaves pending are dropped when its handler's
// promise settles, so none fires in the next run of the same warm instance.
func TestTimersEndWithTheRun(t *testing.T) {
	code := mustCompile(t, "index.js", timerBot).JS
	for name, ex := range executors(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			if a := timerAnswerOf(t, timerRun(t, ex, code, RuntimeAWSLambda, `{"arm":true}`, 0)); a.Runs != 1 {
				t.Fatalf("first run: %+v", a)
			}
			res := timerRun(t, ex, code, RuntimeAWSLambda, `{"wait":true}`, 0)
			a := timerAnswerOf(t, res)
			if a.Runs != 2 {
				t.Fatalf("second run did not reuse the warm instance: %+v", a)
			}
			if a.Fired != 0 || strings.Contains(res.Console, "fired") {
				t.Fatalf("timers of the first run fired in the second: %+v, console %q", a, res.Console)
			}
		})
	}
}

// TestTimerLoopTimesOut: a bot waiting on an interval forever is stopped at its timeout like
// any other, its warm instance is discarded, and the next run is served by a fresh one.
func TestTimerLoopTimesOut(t *testing.T) {
	code := mustCompile(t, "index.js", timerBot).JS
	for name, ex := range executors(t, Options{}) {
		for _, runtime := range []string{RuntimeAWSLambda, RuntimeVMContext} {
			t.Run(name+"/"+runtime, func(t *testing.T) {
				res := timerRun(t, ex, code, runtime, `{"spin":true}`, 300*time.Millisecond)
				if res.Outcome != OutcomeTimeout || !strings.Contains(res.Message, "timed out after 300ms") {
					t.Fatalf("spinning run: %s %q, want a timeout", res.Outcome, res.Message)
				}
				if a := timerAnswerOf(t, timerRun(t, ex, code, runtime, `{}`, 0)); a.Runs != 1 {
					t.Fatalf("run after the timeout: %+v, want a fresh instance", a)
				}
			})
		}
	}
}

// TestTimerRunFailures: a throw in a timer callback fails the run with that error; a promise
// nothing can settle (no timer, or only an unref'd one) fails at once instead of waiting for
// the deadline.
func TestTimerRunFailures(t *testing.T) {
	code := mustCompile(t, "index.js", timerBot).JS
	for name, ex := range executors(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			res := timerRun(t, ex, code, RuntimeAWSLambda, `{"throw":true}`, 0)
			if res.Outcome != OutcomeError || res.Message != "from a timer" || !strings.Contains(res.Console, "TypeError: from a timer") {
				t.Fatalf("throwing timer: %s %q", res.Outcome, res.Message)
			}
			for _, in := range []string{`{"forever":true}`, `{"unref":true}`} {
				start := time.Now()
				res := timerRun(t, ex, code, RuntimeAWSLambda, in, 30*time.Second)
				if res.Outcome != OutcomeError || !strings.Contains(res.Message, "never settled") {
					t.Fatalf("%s: %s %q, want a promise that never settled", in, res.Outcome, res.Message)
				}
				if time.Since(start) > 20*time.Second {
					t.Fatalf("%s waited for its deadline", in)
				}
			}
			if a := timerAnswerOf(t, timerRun(t, ex, code, RuntimeAWSLambda, `{}`, 0)); a.Runs < 2 {
				t.Fatalf("the instance did not survive a failed run: %+v", a)
			}
		})
	}
}

// TestLoopSpawnedWork: work spawned on another goroutine (as fetch's is) wakes the loop, which
// runs its completion (settling the handler's promise) on the run's goroutine, together with
// timers; work still going when its run ends gets an ended context and its completion is
// dropped; work outliving the deadline ends the run as timed out, not with its error.
func TestLoopSpawnedWork(t *testing.T) {
	late := make(chan context.Context, 1)
	sandboxGlobals["testSpawn"] = func(x *execution) goja.Value {
		return x.fn("testSpawn", func(c goja.FunctionCall) goja.Value {
			p, resolve, reject := x.rt.NewPromise()
			v := c.Argument(0).String()
			x.eventLoop().spawn(func(ctx context.Context) func() error {
				switch v {
				case "late", "forever":
					if v == "late" {
						late <- ctx
					}
					<-ctx.Done()
					return func() error {
						if v == "late" {
							panic("a completion ran after its run ended")
						}
						return reject(x.rt.ToValue(ctx.Err().Error()))
					}
				}
				time.Sleep(20 * time.Millisecond)
				return func() error { return resolve(v + " done") }
			})
			return x.rt.ToValue(p)
		})
	}
	t.Cleanup(func() { delete(sandboxGlobals, "testSpawn") })
	code := mustCompile(t, "index.js", `exports.handler = async (m, e) => {
		if (e.input.late) return Promise.race([testSpawn('late'), new Promise((r) => setTimeout(() => r('timer first'), 10))]);
		if (e.input.forever) return testSpawn('forever').catch((err) => 'caught ' + err);
		return Promise.all([testSpawn('a'), testSpawn('b'), new Promise((r) => setTimeout(() => r('timer'), 30))]);
	};`).JS
	r := New(Options{})
	res := counterRun(t, r, code, counterReq{key: "spawn", bot: "spawn"})
	if res.Outcome != OutcomeSuccess || string(res.Body) != `["a done","b done","timer"]` {
		t.Fatalf("run: %s %s %s", res.Outcome, res.Message, res.Body)
	}
	res = counterRun(t, r, code, counterReq{key: "spawn", bot: "spawn", input: `{"late":true}`})
	if res.Outcome != OutcomeSuccess || string(res.Body) != "timer first" {
		t.Fatalf("late run: %s %s %s", res.Outcome, res.Message, res.Body)
	}
	select {
	case <-(<-late).Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context of work outliving its run did not end")
	}
	res = counterRun(t, r, code, counterReq{key: "spawn", bot: "spawn", input: `{"forever":true}`, timeout: 200 * time.Millisecond})
	if res.Outcome != OutcomeTimeout {
		t.Fatalf("work past the deadline: %s %s %s, want a timeout", res.Outcome, res.Message, res.Body)
	}
}

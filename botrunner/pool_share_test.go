package botrunner

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tests of RunsPerWorker: concurrent runs of one bot share a worker; other bots never do.

// newSharingPool is a test pool whose runs share workers as soon as one is busy, whatever the
// number of CPUs of the machine running the tests.
func newSharingPool(t *testing.T, o PoolOptions) *Pool {
	p := newTestPool(t, o)
	p.cpus = 1
	return p
}

// blockedBot is a bot whose runs wait in a medplum call until release is closed, then answer
// their input's n.
const blockedBot = `export async function handler(medplum: any, event: any) {
  await medplum.readResource('Patient', '1');
  return { n: event.input.n };
}`

// runBlocked starts a run of bot with prog (blockedBot) through client, answering {"n":n}.
func runBlocked(t *testing.T, p *Pool, prog *Program, client blockingClient, bot string, n int) <-chan *Result {
	t.Helper()
	return startRun(t, p, Request{BotID: bot, CacheKey: bot, Code: prog.JS, Event: jsonEvent(t, fmt.Sprintf(`{"n":%d}`, n)), Medplum: client})
}

// releaseBlocked lets the blocked runs go on and checks that run i answered {"n":i}.
func releaseBlocked(t *testing.T, client blockingClient, results []<-chan *Result) {
	t.Helper()
	close(client.release)
	for i, ch := range results {
		if res, want := <-ch, fmt.Sprintf(`{"n":%d}`, i); res == nil || string(res.Body) != want {
			t.Errorf("run %d: %+v, want %s", i, res, want)
		}
	}
}

// poolCounts is how many workers are idle and busy.
func poolCounts(p *Pool) (idle, busy int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle), len(p.busy)
}

// startRun runs req in the background; the result arrives on the returned channel.
func startRun(t *testing.T, p *Pool, req Request) <-chan *Result {
	t.Helper()
	ch := make(chan *Result, 1)
	go func() {
		res, err := p.Run(ctxT(t), req)
		if err != nil {
			t.Errorf("run of %s: %v", req.BotID, err)
		}
		ch <- res
	}()
	return ch
}

// workerLoads is the number of runs each busy worker has, by bot.
func workerLoads(p *Pool) map[string][]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	loads := map[string][]int{}
	for w := range p.busy {
		loads[w.bot] = append(loads[w.bot], w.runs)
	}
	return loads
}

func TestPoolSharesWorkersOnlyBetweenRunsOfOneBot(t *testing.T) {
	p := newSharingPool(t, PoolOptions{RunsPerWorker: 3, Options: Options{MaxConcurrent: 6}})
	prog := mustCompile(t, "index.ts", blockedBot)
	client := newBlockingClient()

	// One at a time, so each run finds the pool as the previous ones left it.
	var results []<-chan *Result
	steps := []struct {
		bot    string
		spawns int64 // workers started so far
	}{
		{"a", 1}, // no worker yet
		{"a", 1}, // one worker per CPU is busy: shares a's
		{"a", 1}, // a's worker now has 3 runs, its limit
		{"a", 2}, // so a fourth run of a gets a new worker
		{"b", 3}, // another bot never shares a's workers, even with room in one
		{"a", 3}, // the least loaded of a's workers
	}
	for i, s := range steps {
		results = append(results, runBlocked(t, p, prog, client, s.bot, i))
		<-client.entered
		if got := p.spawns.Load(); got != s.spawns {
			t.Fatalf("after run %d (bot %s): %d workers started, want %d", i, s.bot, got, s.spawns)
		}
	}
	loads := workerLoads(p)
	if fmt.Sprint(loads["a"]) != "[3 2]" && fmt.Sprint(loads["a"]) != "[2 3]" || fmt.Sprint(loads["b"]) != "[1]" {
		t.Errorf("runs per busy worker by bot: %v, want a: 3 and 2, b: 1", loads)
	}

	releaseBlocked(t, client, results)
	if idle, busy := poolCounts(p); idle != 3 || busy != 0 {
		t.Errorf("after the runs: %d idle and %d busy workers, want 3 and 0", idle, busy)
	}
	// An idle worker serves any bot: it kept neither bot's identity.
	res, err := p.Run(ctxT(t), Request{BotID: "c", CacheKey: "c", Code: mustCompile(t, "index.js", `exports.handler = () => 'c'`).JS})
	if err != nil || string(res.Body) != "c" || p.spawns.Load() != 3 {
		t.Errorf("run of c: %+v, %v; %d workers started, want 3", res, err, p.spawns.Load())
	}
}

// Runs that arrive together while the first worker starts join it instead of starting one each,
// and once the CPUs are covered an idle worker is left idle (to be reaped) rather than kept busy.
func TestPoolBurstJoinsAStartingWorker(t *testing.T) {
	p := newSharingPool(t, PoolOptions{RunsPerWorker: 4, Options: Options{MaxConcurrent: 8}})
	prog := mustCompile(t, "index.ts", blockedBot)
	client := newBlockingClient()
	var results []<-chan *Result
	for i := range 6 {
		results = append(results, runBlocked(t, p, prog, client, "a", i))
	}
	for range 6 {
		<-client.entered
	}
	if got := p.spawns.Load(); got != 2 {
		t.Errorf("%d workers started for a burst of 6 runs at 4 per worker, want 2", got)
	}
	releaseBlocked(t, client, results)

	// Two idle workers; one CPU. Runs now go to one worker while the other stays idle.
	client = newBlockingClient()
	results = results[:0]
	for i := range 3 {
		results = append(results, runBlocked(t, p, prog, client, "a", i))
		<-client.entered
	}
	if idle, busy := poolCounts(p); idle != 1 || busy != 1 {
		t.Errorf("3 runs on one CPU: %d idle and %d busy workers, want 1 and 1", idle, busy)
	}
	releaseBlocked(t, client, results)
	if got := p.spawns.Load(); got != 2 {
		t.Errorf("%d workers started, want still 2", got)
	}
}

func TestPoolWithOneRunPerWorkerNeverShares(t *testing.T) {
	p := newSharingPool(t, PoolOptions{RunsPerWorker: 1, Options: Options{MaxConcurrent: 3}})
	prog := mustCompile(t, "index.ts", blockedBot)
	client := newBlockingClient()
	var results []<-chan *Result
	for i := range 3 {
		results = append(results, runBlocked(t, p, prog, client, "a", i))
		<-client.entered
	}
	if got := p.spawns.Load(); got != 3 {
		t.Errorf("%d workers for 3 concurrent runs, want 3", got)
	}
	releaseBlocked(t, client, results)
}

// A bot that brings its worker down takes the runs of that bot sharing the worker with it, and
// no other bot's; each is told why.
func TestPoolSharedWorkerFailureStaysWithItsBot(t *testing.T) {
	tests := []struct {
		name    string
		culprit string        // the second run of bot a, which shares the first one's worker
		timeout time.Duration // the culprit's
		// what the first run of a is told; the culprit's own result is checked by
		// TestPoolStopsRunawayBots
		sibling string
	}{
		{"memory bomb", `export function handler() { const a: string[] = []; for (;;) a.push('x'.repeat(1 << 20) + a.length) }`,
			time.Minute, "memory limit exceeded"},
		{"native call that never ends", `export function handler() { return /(?=a)(a+)+b/.test('a'.repeat(40)) }`,
			time.Second, "bot worker killed during another run of this bot, which shared it: the bot was stuck in a native call past its deadline"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newSharingPool(t, PoolOptions{RunsPerWorker: 2, WorkerMemory: 128 << 20, Options: Options{MaxConcurrent: 3}})
			waiting := mustCompile(t, "index.ts", blockedBot)
			client := newBlockingClient()
			var once sync.Once
			release := func() { once.Do(func() { close(client.release) }) }
			defer release()

			first := startRun(t, p, Request{BotID: "a", CacheKey: "a", Code: waiting.JS, Event: jsonEvent(t, `{"n":1}`), Medplum: client, Timeout: time.Minute})
			<-client.entered
			other := startRun(t, p, Request{BotID: "b", CacheKey: "b", Code: waiting.JS, Event: jsonEvent(t, `{"n":2}`), Medplum: client, Timeout: time.Minute})
			<-client.entered

			culprit := mustCompile(t, "index.ts", tc.culprit)
			res, err := p.Run(ctxT(t), Request{BotID: "a", CacheKey: "a-" + tc.name, Code: culprit.JS, Timeout: tc.timeout})
			if err != nil || res.Outcome == OutcomeSuccess {
				t.Fatalf("culprit: %+v, %v", res, err)
			}
			if got := p.spawns.Load(); got != 2 {
				t.Errorf("%d workers started, want 2 (the culprit shares a's)", got)
			}

			// a's first run ends with its worker, or is interrupted by the same memory limit.
			select {
			case res := <-first:
				if res == nil {
					t.Fatal("a's first run got no result")
				}
				if res.Outcome != OutcomeError || !strings.Contains(res.Message, tc.sibling) {
					t.Errorf("a's first run: %v %q, want an error saying %q", res.Outcome, res.Message, tc.sibling)
				}
				assertOutcomeBody(t, res)
			case <-time.After(30 * time.Second):
				t.Fatal("a's first run did not end with its worker")
			}
			// b's run, in a worker of its own, is untouched.
			release()
			if res := <-other; res == nil || string(res.Body) != `{"n":2}` {
				t.Errorf("b's run: %+v", res)
			}
			// And a runs again.
			res, err = p.Run(ctxT(t), Request{BotID: "a", CacheKey: "a", Code: waiting.JS, Event: jsonEvent(t, `{"n":3}`), Medplum: client})
			if err != nil || string(res.Body) != `{"n":3}` {
				t.Errorf("a again: %+v, %v", res, err)
			}
		})
	}
}

package botrunner

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEncodeIntoRefusesHostileViews: encodeInto reads its destination's buffer, byteOffset and
// byteLength as properties, so a bot can hand it any numbers. Offsets and lengths whose sum
// overflows int64 once reached a Go slice-bounds panic; every such view is a TypeError now.
func TestEncodeIntoRefusesHostileViews(t *testing.T) {
	views := map[string]string{
		"2^62 + 2^62":     `{ buffer: new ArrayBuffer(8), byteOffset: 2 ** 62, byteLength: 2 ** 62 }`,
		"small + 2^63-1":  `{ buffer: new ArrayBuffer(8), byteOffset: 4, byteLength: 2 ** 63 }`,
		"2^63 + small":    `{ buffer: new ArrayBuffer(8), byteOffset: 2 ** 63, byteLength: 4 }`,
		"past the end":    `{ buffer: new ArrayBuffer(8), byteOffset: 6, byteLength: 4 }`,
		"offset past end": `{ buffer: new ArrayBuffer(8), byteOffset: 9, byteLength: 0 }`,
		"negative":        `{ buffer: new ArrayBuffer(8), byteOffset: -1, byteLength: 4 }`,
		"huge view":       `Object.defineProperty(new Uint8Array(8), 'byteLength', { value: 2 ** 62 })`,
	}
	r := New(Options{})
	for name, view := range views {
		t.Run(name, func(t *testing.T) {
			res := run(t, r, `export async function handler(): Promise<any> {
				try { new TextEncoder().encodeInto('abc', `+view+` as any); return 'encoded' } catch (e: any) { return e.name + ': ' + e.message }
			}`, jsonEvent(t, `{}`))
			if res.Outcome != OutcomeSuccess || !strings.HasPrefix(string(res.Body), "TypeError") {
				t.Fatalf("%v %q: %s", res.Outcome, res.Message, res.Body)
			}
		})
	}
	// A view inside its buffer still works.
	res := run(t, r, `export async function handler(): Promise<any> {
		const b = new Uint8Array(8); const r = new TextEncoder().encodeInto('xy', b.subarray(6, 8)); return [r.written, b[6], b[7]].join()
	}`, jsonEvent(t, `{}`))
	if string(res.Body) != "2,120,121" {
		t.Fatalf("%v %q: %s", res.Outcome, res.Message, res.Body)
	}
}

// TestHugeErrorMessagesAreCutInBothModes: a bot that throws a 20 MB message is answered with at
// most maxErrorMessage bytes of it, in process as from a worker (one function bounds both).
func TestHugeErrorMessagesAreCutInBothModes(t *testing.T) {
	prog := mustCompile(t, "index.js", `exports.handler = () => { throw new Error('x'.repeat(20e6)) }`)
	runners := map[string]Executor{
		"inprocess": New(Options{}),
		"process":   newTestPool(t, PoolOptions{}),
	}
	for name, r := range runners {
		t.Run(name, func(t *testing.T) {
			res, err := r.Run(ctxT(t), Request{Code: prog.JS, CacheKey: "huge", Timeout: 10 * time.Second, Event: jsonEvent(t, `{}`)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != OutcomeError || !strings.HasSuffix(res.Message, "[truncated]") ||
				len(res.Message) > maxErrorMessage+100 || len(res.Body) > maxErrorMessage+1000 {
				t.Fatalf("%v: message of %d bytes, body of %d", res.Outcome, len(res.Message), len(res.Body))
			}
		})
	}
}

// TestBacktrackingRegExpsEndWithAnError: a catastrophically backtracking regular expression
// (regexp2, which goja uses for backreferences) stops after regexpMatchTimeout (at most) and the bot sees a
// RangeError, whichever method ran it and whether the pattern was a literal or built at run
// time; never a silent "no match". The run's own timeout is far longer, so what ends these runs
// is the match limit. A replacer function's time does not count as matching.
func TestBacktrackingRegExpsEndWithAnError(t *testing.T) {
	if testing.Short() {
		t.Skip("each case takes regexpMatchTimeout")
	}
	const s = `'a'.repeat(60) + 'b'`
	cases := map[string]string{
		"literal test":     `/^(a+)+\1$/.test(` + s + `)`,
		"new RegExp":       `new RegExp('^(a+)+\\1$').test(` + s + `)`,
		"String.match":     `(` + s + `).match(/^(a+)+\1$/)`,
		"String.replace":   `(` + s + `).replace(/^(a+)+\1$/g, 'x')`,
		"String.search":    `(` + s + `).search(/^(a+)+\1$/)`,
		"String.split":     `(` + s + `).split(/^(a+)+\1$/)`,
		"String.matchAll":  `[...(` + s + `).matchAll(/^(a+)+\1$/g)]`,
		"sticky lastIndex": `(() => { const r = /(a+)+\1$/y; r.lastIndex = 1; return r.test(` + s + `) })()`,
	}
	r := New(Options{})
	t.Run("cases", func(t *testing.T) {
		for name, expr := range cases {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				start := time.Now()
				res, err := r.Run(ctxT(t), Request{Code: mustCompile(t, "index.ts", `export async function handler(): Promise<any> {
				try { return JSON.stringify(`+expr+`) } catch (e: any) { return e.name + ': ' + e.message }
			}`).JS, CacheKey: name, Timeout: time.Minute, Event: jsonEvent(t, `{}`)})
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(string(res.Body), "RangeError: regular expression took longer") {
					t.Fatalf("%v %q: %s after %v", res.Outcome, res.Message, res.Body, time.Since(start))
				}
				// Generous: the match stops at regexpMatchTimeout plus regexp2's clock period (100 ms).
				if d := time.Since(start); d > regexpMatchTimeout+5*time.Second {
					t.Errorf("took %v", d)
				}
			})
		}
	})
	// Workers run this package too.
	res, err := newTestPool(t, PoolOptions{}).Run(ctxT(t), Request{Code: mustCompile(t, "index.js",
		`exports.handler = () => /^(a+)+\1$/.test('a'.repeat(60) + 'b')`).JS, Timeout: time.Minute, Event: jsonEvent(t, `{}`)})
	if err != nil || res.Outcome != OutcomeError || !strings.Contains(res.Message, "regular expression took longer") {
		t.Fatalf("worker: %+v, %v", res, err)
	}
	// Slow replacer functions are not slow matching.
	res = run(t, r, `export async function handler(): Promise<any> {
		return 'a-b'.replace(/(?<=a)-(?=b)/, () => { const end = Date.now() + 2500; while (Date.now() < end); return '+' })
	}`, jsonEvent(t, `{}`))
	if string(res.Body) != "a+b" {
		t.Fatalf("%v %q: %s", res.Outcome, res.Message, res.Body)
	}
}

// nativeStuckClient stands for a native call that ignores the run's interrupt and context: its
// Do returns only when release is closed.
type nativeStuckClient struct{ release chan struct{} }

func (c nativeStuckClient) Do(context.Context, string, string, url.Values, []byte, string, http.Header) (int, string, []byte, error) {
	<-c.release
	return 200, ContentTypeFHIR, []byte(`{"resourceType":"Patient","id":"1"}`), nil
}

// TestStuckRunsGiveTheirSlotBack: a run stuck in native code past its deadline is answered
// abandonGrace later and its slot is free for other runs at once, not when the native call
// returns. While MaxConcurrent runs are stuck, new runs are refused with ErrBusy, which bounds
// the goroutines running bot code; they are accepted again once the stuck runs end.
func TestStuckRunsGiveTheirSlotBack(t *testing.T) {
	r := New(Options{MaxConcurrent: 2, QueueTimeout: 200 * time.Millisecond})
	stuckProg := mustCompile(t, "index.js", `exports.handler = async (m) => (await m.readResource('Patient', '1')).id`)
	client := nativeStuckClient{release: make(chan struct{})}
	stuck := func() *Result {
		res, err := r.Run(ctxT(t), Request{Code: stuckProg.JS, CacheKey: "stuck", Timeout: 100 * time.Millisecond, Medplum: client, Event: jsonEvent(t, `{}`)})
		if err != nil || res.Outcome != OutcomeTimeout {
			t.Fatalf("stuck run: %+v, %v", res, err)
		}
		return res
	}
	stuck()
	if got := r.stuck.Load(); got != 1 {
		t.Fatalf("%d stuck runs counted", got)
	}

	// Both slots serve other runs while the first run's goroutine is still stuck.
	holding := newBlockingClient()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Run(ctxT(t), Request{Code: stuckProg.JS, CacheKey: "stuck", Timeout: 5 * time.Second, Medplum: holding, Event: jsonEvent(t, `{}`)})
			if err == nil && res.Outcome != OutcomeSuccess {
				err = errors.New(res.Message)
			}
			errs <- err
		}()
	}
	for range 2 {
		<-holding.entered
	}
	close(holding.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("run beside a stuck one: %v", err)
		}
	}

	// MaxConcurrent stuck runs: new runs are refused until they end.
	stuck()
	if _, err := r.Run(ctxT(t), Request{Code: `exports.handler = () => 1`, CacheKey: "one", Event: jsonEvent(t, `{}`)}); !errors.Is(err, ErrBusy) {
		t.Fatalf("run with every slot's worth of stuck runs: %v, want ErrBusy", err)
	}
	close(client.release)
	waitFor(t, func() bool { return r.stuck.Load() == 0 })
	if res, err := r.Run(ctxT(t), Request{Code: `exports.handler = () => 1`, CacheKey: "one", Event: jsonEvent(t, `{}`)}); err != nil || string(res.Body) != "1" {
		t.Fatalf("run after the stuck ones ended: %+v, %v", res, err)
	}
}

// TestHeapBudgetStopsBotsFarBelowTheProcessLimit: in process, the watchdog's limit is the heap
// the process holds with no bot running plus HeapBudget, not a fraction of GOMEMLIMIT. Each bomb
// stops with "memory limit exceeded" while the heap's peak stays within twice the budget above
// the idle heap (the slack: a collection's lag and one allocation in flight). MaxHeapBytes is a
// backstop at 8 budgets, so that the test cannot eat the machine when the budget is ignored.
func TestHeapBudgetStopsBotsFarBelowTheProcessLimit(t *testing.T) {
	const budget = 64 << 20
	bombs := map[string]string{
		"strings":      `const a: string[] = []; for (;;) a.push('x'.repeat(1e6) + a.length)`,
		"typed arrays": `const a: Uint8Array[] = []; for (;;) a.push(new Uint8Array(4e6).fill(1))`,
		"objects":      `const a: any[] = []; for (let i = 0; ; i++) a.push({ i, s: 'y' + i })`,
	}
	for name, src := range bombs {
		t.Run(name, func(t *testing.T) {
			idle := liveHeap()
			r := New(Options{HeapBudget: budget, MaxHeapBytes: int64(idle) + 8*budget})
			var peak atomic.Uint64
			done := make(chan struct{})
			go func() {
				s := []metrics.Sample{{Name: heapObjectsMetric}}
				for {
					select {
					case <-done:
						return
					case <-time.After(time.Millisecond):
					}
					metrics.Read(s)
					if v := s[0].Value.Uint64(); v > peak.Load() {
						peak.Store(v)
					}
				}
			}()
			res, err := r.Run(ctxT(t), Request{Code: mustCompile(t, "index.ts", `export function handler() { `+src+` }`).JS, Timeout: 30 * time.Second})
			close(done)
			if err != nil {
				t.Fatal(err)
			}
			grown := int64(peak.Load()) - int64(idle)
			t.Logf("heap grew by %d MiB at most (budget %d MiB)", grown>>20, budget>>20)
			if res.Outcome != OutcomeError || !strings.Contains(res.Message, "memory limit exceeded (running bots grew the heap by more than 64 MiB)") {
				t.Fatalf("%v %q", res.Outcome, res.Message)
			}
			if grown > 2*budget {
				t.Errorf("heap grew by %d MiB, more than twice the budget", grown>>20)
			}
			// The next run is not stopped for what the bomb held: the live figure of the last
			// collection may still count it, so the watchdog judges by a fresh one.
			res = run(t, r, `export function handler() { const end = Date.now() + 200; while (Date.now() < end); return 'fine' }`, jsonEvent(t, `{}`))
			if res.Outcome != OutcomeSuccess {
				t.Errorf("run after the bomb: %v %q", res.Outcome, res.Message)
			}
		})
	}
}

// TestOnlyProgramsThatNameRegExpsAreGuarded: the guard costs a trivial run its time, so programs
// that make no regular expression by ordinary means go without it; every ordinary way in is seen.
func TestOnlyProgramsThatNameRegExpsAreGuarded(t *testing.T) {
	cases := map[string]bool{
		`export async function handler(m: any, e: any) { return e.input }`:                                  false,
		`export const handler = (m: any, e: any) => String(e.input).split(',').join(';').replace('a', 'b')`: false,
		`export const handler = (m: any, e: any) => /^(a+)+\1$/.test(e.input)`:                              true,
		`export const handler = (m: any, e: any) => new RegExp(e.input).test('x')`:                          true,
		`export const handler = (m: any, e: any) => String(e.input).match('(a+)+b')`:                        true,
		`export const handler = (m: any, e: any) => String(e.input).search('x')`:                            true,
		`export const handler = (m: any, e: any) => [...'ab'.matchAll('a' as any)]`:                         true,
		`export const handler = (m: any, e: any) => (globalThis as any)['RegExp']`:                          true,
		"export const handler = (m: any, e: any) => `${eval('1')}`":                                         true,
		`export const handler = (m: any, e: any) => new Function('return 1')()`:                             true,
		`export const handler = async (m: any) => m.search('Patient')`:                                      true,
	}
	for src, want := range cases {
		p := mustCompile(t, "index.ts", src)
		if got := !p.regexpFree; got != want {
			t.Errorf("%s: guarded %v, want %v", src, got, want)
		}
	}
}

// TestHeapBudgetDoesNotGrowFromRunToRun: the idle heap the budget is added to is sampled only
// from a collection that started after the last run ended. A bot that held most of the budget
// when the last collection ran must not raise its successor's limit by what it held: the live
// figure then still counts it, and the budget would grow with every run.
func TestHeapBudgetDoesNotGrowFromRunToRun(t *testing.T) {
	const budget = 96 << 20
	idle := liveHeap()
	r := New(Options{HeapBudget: budget, MaxHeapBytes: int64(idle) + 8*budget})
	// Holds ~64 MiB and makes the collector run while holding it.
	holder := `export function handler() { const a: string[] = []; for (let i = 0; i < 64; i++) a.push('h'.repeat(1 << 20) + i);
		for (let i = 0; i < 200; i++) 'g'.repeat(1 << 20) + i; return a.length }`
	if res := run(t, r, holder, jsonEvent(t, `{}`)); res.Outcome != OutcomeSuccess {
		t.Fatalf("holder: %v %q", res.Outcome, res.Message)
	}
	// Right after it, a bomb: its limit must still be the idle heap plus the budget.
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		s := []metrics.Sample{{Name: liveHeapMetric}}
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
		}
	}()
	res := run(t, r, `export function handler() { const a: string[] = []; for (;;) a.push('x'.repeat(1 << 20) + a.length) }`, jsonEvent(t, `{}`))
	close(done)
	if !strings.Contains(res.Message, "memory limit exceeded") {
		t.Fatalf("bomb: %v %q", res.Outcome, res.Message)
	}
	grown := int64(peak.Load()) - int64(idle)
	t.Logf("live heap at most %d MiB over idle (budget %d MiB)", grown>>20, budget>>20)
	// Stopped at the limit, the bomb's live heap is the budget plus what one check lets through;
	// with the holder's 64 MiB added to the baseline it would pass budget + 64 MiB.
	if grown > budget+48<<20 {
		t.Errorf("live heap grew by %d MiB", grown>>20)
	}
}

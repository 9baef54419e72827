package botrunner

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The pool tests start real worker processes: this test binary, which TestMain turns into a
// worker when the pool's environment marks it as one.

func newTestPool(t *testing.T, o PoolOptions) *Pool {
	t.Helper()
	o.Command = testWorkerCommand()
	p, err := NewPool(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// busyWorker waits for the worker running a bot and returns it.
func busyWorker(t *testing.T, p *Pool) *worker {
	t.Helper()
	var w *worker
	waitFor(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for b := range p.busy {
			w = b
		}
		return w != nil
	})
	return w
}

// sameResult compares what a caller sees of two results.
func sameResult(t *testing.T, got, want *Result) {
	t.Helper()
	if got.Outcome != want.Outcome || string(got.Body) != string(want.Body) || got.ContentType != want.ContentType ||
		got.Message != want.Message || got.Console != want.Console || got.ConsoleTruncated != want.ConsoleTruncated {
		t.Errorf("pool result\n%v %q %s %q console %q %v\nin-process result\n%v %q %s %q console %q %v",
			got.Outcome, got.Message, got.Body, got.ContentType, got.Console, got.ConsoleTruncated,
			want.Outcome, want.Message, want.Body, want.ContentType, want.Console, want.ConsoleTruncated)
	}
}

func TestPoolAnswersLikeTheRunner(t *testing.T) {
	s, yes, n, d := "s3cret", true, int64(7), 2.5
	full := Event{
		Bot:         Reference{Reference: "Bot/b1", Display: "Echo"},
		ContentType: "application/json; charset=utf-8",
		Input:       mustInput(t, MediaJSON, `{"x":1}`),
		Secrets: map[string]Secret{
			"API_KEY": {Name: "API_KEY", ValueString: &s}, "FLAG": {ValueBoolean: &yes},
			"N": {Name: "N", ValueInteger: &n}, "D": {Name: "D", ValueDecimal: &d}, "EMPTY": {},
		},
		TraceID:   "trace-1",
		Requester: &Reference{Reference: "Practitioner/p1", Display: "Dr P"},
		Headers:   map[string]string{"x-custom": "1", "Authorization": "Bearer t"},
	}
	const echo = `export async function handler(m: any, event: any) { return event.input }`
	tests := []struct {
		name    string
		src     string
		event   Event
		timeout time.Duration
	}{
		{"json", echo, jsonEvent(t, `{"a":[1,2.5,"x",true,null],"__proto__":{"p":1}}`), 0},
		{"fhir", echo, Event{ContentType: MediaFHIR, Input: mustInput(t, MediaFHIR, `{"resourceType":"Patient","id":"p"}`)}, 0},
		{"text", echo, Event{ContentType: MediaText, Input: mustInput(t, MediaText, "héllo")}, 0},
		{"empty text", echo, Event{ContentType: MediaText, Input: mustInput(t, MediaText, "")}, 0},
		{"form", echo, Event{ContentType: MediaForm, Input: mustInput(t, MediaForm, "z=1&a=b+c")}, 0},
		{"empty form", echo, Event{ContentType: MediaForm, Input: mustInput(t, MediaForm, "")}, 0},
		{"hl7 message", `export function handler(m: any, e: any) { return e.input }`, hl7Event(t), 0},
		{"hl7 field", `export function handler(m: any, e: any) { return e.input.getSegment('PID').getField(5).getComponent(2) }`, hl7Event(t), 0},
		{"no input", echo, Event{}, 0},
		{"whole event", `export async function handler(m: any, event: any) { return event }`, full, 0},
		{"console", `export function handler() { console.log('a', {b: 1}); console.warn('w'); return 'ok' }`, jsonEvent(t, `{}`), 0},
		{"console truncated", `export function handler() { for (let i = 0; i < 100; i++) console.log('line', i) }`, jsonEvent(t, `{}`), 0},
		{"throws", `export function handler() { console.log('before'); throw new Error('bot failed') }`, jsonEvent(t, `{}`), 0},
		{"rejects with an outcome", `import { OperationOutcomeError, badRequest } from '@medplum/core';
export async function handler() { throw new OperationOutcomeError(badRequest('bad input')) }`, jsonEvent(t, `{}`), 0},
		{"recursion", `export function handler() { function f(): any { return f() } return f() }`, jsonEvent(t, `{}`), 0},
		{"unserialisable", `export function handler() { return 10n }`, jsonEvent(t, `{}`), 0},
		{"result too large", `export function handler() { return 'x'.repeat(5000) }`, jsonEvent(t, `{}`), 0},
		{"undefined", `export function handler() {}`, jsonEvent(t, `{}`), 0},
		{"no handler", `export const x = 1`, jsonEvent(t, `{}`), 0},
		{"require fs", `export function handler() { return require('fs') }`, jsonEvent(t, `{}`), 0},
		{"no backend", `export async function handler(m: any) { return m.readResource('Patient', '1') }`, jsonEvent(t, `{}`), 0},
		{"timeout", `export async function handler() { console.log('waiting'); await null; for (;;) {} }`, jsonEvent(t, `{}`), 200 * time.Millisecond},
	}
	o := Options{MaxConsoleBytes: 256, MaxResultBytes: 4096}
	r := New(o)
	p := newTestPool(t, PoolOptions{Options: o})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prog := mustCompile(t, "index.ts", tc.src)
			req := Request{CacheKey: tc.name, Code: prog.JS, Filename: "index.ts", Timeout: tc.timeout, Event: tc.event}
			want, err := r.Run(ctxT(t), req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Run(ctxT(t), req)
			if err != nil {
				t.Fatal(err)
			}
			sameResult(t, got, want)
		})
	}
	t.Run("code that does not load", func(t *testing.T) {
		req := Request{CacheKey: "broken", Code: "exports.handler = (", Filename: "index.js"}
		want, _ := r.Run(ctxT(t), req)
		got, err := p.Run(ctxT(t), req)
		if err != nil {
			t.Fatal(err)
		}
		sameResult(t, got, want)
	})
}

// recordedCall is what a MedplumClient received.
type recordedCall struct {
	Method, Path, ContentType string
	Query                     url.Values
	Body                      []byte
	NilBody, HasDeadline      bool
	Header                    http.Header
}

// recordingClient answers like a small FHIR server and records every call.
type recordingClient struct {
	mu    sync.Mutex
	calls []recordedCall
}

func (c *recordingClient) Do(ctx context.Context, method, path string, query url.Values, body []byte, contentType string, header http.Header) (int, string, []byte, error) {
	_, hasDeadline := ctx.Deadline()
	c.mu.Lock()
	c.calls = append(c.calls, recordedCall{method, path, contentType, query, body, body == nil, hasDeadline, header})
	c.mu.Unlock()
	switch {
	case path == "Patient/down":
		return 0, "", nil, &url.Error{Op: "Get", URL: "http://backend.internal/fhir/Patient/down?secret=1", Err: errors.New("connection refused")}
	case path == "Patient/missing":
		return 404, ContentTypeFHIR, []byte(`{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-found","details":{"text":"Gone fishing"}}]}`), nil
	case method == http.MethodPost:
		return 201, ContentTypeFHIR, append([]byte(`{"id":"new",`), body[1:]...), nil
	}
	return 200, ContentTypeFHIR, []byte(`{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{"resourceType":"Patient","id":"1"}}]}`), nil
}

func TestPoolForwardsMedplumCalls(t *testing.T) {
	prog := mustCompile(t, "index.ts", `export async function handler(medplum: any, event: any) {
  const found = await medplum.searchOne('Patient', { name: ['a', 'b'], _count: 2 });
  const created = await medplum.createResource({ resourceType: 'Observation', status: 'final', subject: { reference: 'Patient/1' } });
  await medplum.createResourceIfNoneExist({ resourceType: 'Patient', id: 'x' }, 'identifier=http://x|1');
  await medplum.get('fhir/R4/Patient?_id=1');
  await medplum.deleteResource('Patient', '1');
  let missing, down;
  try { await medplum.readResource('Patient', 'missing') } catch (e: any) { missing = e.message }
  try { await medplum.readResource('Patient', 'down') } catch (e: any) { down = e.message }
  return { found, created, missing, down, trace: event.traceId };
}`)
	req := Request{CacheKey: "medplum", Code: prog.JS, Event: Event{TraceID: "t-1"}}
	inProcess, inPool := &recordingClient{}, &recordingClient{}
	req.Medplum = inProcess
	want, err := New(Options{}).Run(ctxT(t), req)
	if err != nil || want.Outcome != OutcomeSuccess {
		t.Fatalf("in process: %+v, %v", want, err)
	}
	req.Medplum = inPool
	got, err := newTestPool(t, PoolOptions{}).Run(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	sameResult(t, got, want)
	if !strings.Contains(string(got.Body), `"down":"FHIR backend request failed: connection refused"`) ||
		!strings.Contains(string(got.Body), `"missing":"Not found"`) || strings.Contains(string(got.Body), "secret=1") {
		t.Errorf("body = %s", got.Body)
	}
	if len(inPool.calls) != 7 || !reflect.DeepEqual(inPool.calls, inProcess.calls) {
		t.Errorf("calls through the pool:\n%+v\nin process:\n%+v", inPool.calls, inProcess.calls)
	}
}

func TestPoolCancellation(t *testing.T) {
	p := newTestPool(t, PoolOptions{})
	checkContextEndsTheRun(t, p)
	if n := p.spawns.Load(); n != 1 {
		t.Errorf("%d workers started; interrupted runs should not cost a worker", n)
	}
}

// hookClient calls f on the bot's first medplum call, from the gateway's side of the pipe.
type hookClient struct{ f func() }

func (c hookClient) Do(context.Context, string, string, url.Values, []byte, string, http.Header) (int, string, []byte, error) {
	c.f()
	return 200, ContentTypeFHIR, []byte(`{"resourceType":"Patient","id":"1"}`), nil
}

func TestPoolStopsRunawayBots(t *testing.T) {
	const memory = 128 << 20
	type replaced int
	const (
		kept replaced = iota
		renewed
		either // a memory bomb is stopped by whichever limit sees it first
	)
	tests := []struct {
		name    string
		src     string
		hook    func(t *testing.T, w *worker) // called from the bot's medplum call
		outcome Outcome
		message string // the result's message contains it
		worker  replaced
		timeout time.Duration // default 1s
	}{
		{"loop", `export function handler() { for (;;) {} }`, nil,
			OutcomeTimeout, "bot execution timed out after 1s", kept, 0},
		{"loop after await", `export async function handler() { await Promise.resolve(); for (;;) {} }`, nil,
			OutcomeTimeout, "bot execution timed out after 1s", kept, 0},
		{"recursion", `export function handler() { const f = (n: number): number => f(n + 1) + 1; return f(0) }`, nil,
			OutcomeError, "Maximum call stack size exceeded", kept, 0},
		{"memory bomb", `export function handler() { const a: string[] = []; for (;;) a.push('x'.repeat(1 << 20) + a.length) }`, nil,
			OutcomeError, "memory limit exceeded", either, time.Minute},
		{"one huge allocation", `export function handler() { const s = 'y'.repeat(400 << 20); for (;;) { if (s.length === 0) return } }`, nil,
			OutcomeError, "memory limit exceeded", either, time.Minute},
		{"native call that never ends", `export function handler() { return /(?=a)(a+)+b/.test('a'.repeat(40)) }`, nil,
			OutcomeTimeout, "bot execution timed out after 1s", renewed, 0},
		{"worker killed from outside", `export async function handler(m: any) { await m.readResource('Patient', '1'); for (;;) {} }`,
			func(t *testing.T, w *worker) { _ = w.cmd.Process.Kill() },
			OutcomeError, "bot worker crashed (signal: killed)", renewed, 0},
		{"worker frozen", `export async function handler(m: any) { await m.readResource('Patient', '1'); for (;;) {} }`,
			func(t *testing.T, w *worker) { _ = w.cmd.Process.Signal(syscall.SIGSTOP) },
			OutcomeError, "bot worker killed: the bot did not stop at its deadline", renewed, 0},
	}
	p := newTestPool(t, PoolOptions{WorkerMemory: memory, Options: Options{MaxConcurrent: 1}})
	echo := mustCompile(t, "index.js", `exports.handler = (m, e) => e.input`)
	runEcho := func(t *testing.T) {
		t.Helper()
		res, err := p.Run(ctxT(t), Request{CacheKey: "echo", Code: echo.JS, Event: jsonEvent(t, `{"still":"here"}`)})
		if err != nil || res.Outcome != OutcomeSuccess || string(res.Body) != `{"still":"here"}` {
			t.Fatalf("echo: %+v, %v", res, err)
		}
	}
	runEcho(t) // start the worker
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prog := mustCompile(t, "index.ts", tc.src)
			req := Request{CacheKey: tc.name, Code: prog.JS, Timeout: cmp.Or(tc.timeout, time.Second)}
			if tc.hook != nil {
				req.Medplum = hookClient{func() { tc.hook(t, busyWorker(t, p)) }}
			}
			before := p.spawns.Load()
			res, err := p.Run(ctxT(t), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.outcome || !strings.Contains(res.Message, tc.message) {
				t.Errorf("result = %v %q, want %v %q", res.Outcome, res.Message, tc.outcome, tc.message)
			}
			assertOutcomeBody(t, res)
			runEcho(t)
			got := kept
			if p.spawns.Load() > before {
				got = renewed
			}
			if tc.worker != either && got != tc.worker {
				t.Errorf("worker replaced: %v, want %v", got == renewed, tc.worker == renewed)
			}
			t.Logf("%s: %s", tc.name, res.Message)
		})
	}
}

// blockingClient holds each medplum call until release is closed.
type blockingClient struct {
	entered chan struct{}
	release chan struct{}
}

func newBlockingClient() blockingClient {
	return blockingClient{entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (c blockingClient) Do(ctx context.Context, _, path string, _ url.Values, _ []byte, _ string, _ http.Header) (int, string, []byte, error) {
	c.entered <- struct{}{}
	select {
	case <-c.release:
	case <-ctx.Done():
		return 0, "", nil, ctx.Err()
	}
	return 200, ContentTypeFHIR, []byte(`{"resourceType":"Patient","id":"` + strings.TrimPrefix(path, "Patient/") + `"}`), nil
}

func TestPoolRunsBotsConcurrently(t *testing.T) {
	const slots = 3
	p := newTestPool(t, PoolOptions{Options: Options{MaxConcurrent: slots, QueueTimeout: 50 * time.Millisecond}})
	prog := mustCompile(t, "index.ts", `export async function handler(medplum: any, event: any) {
  const p = await medplum.readResource('Patient', String(event.input.n));
  return { n: event.input.n * 2, id: p.id };
}`)
	client := newBlockingClient()
	run := func(n string) (*Result, error) {
		return p.Run(ctxT(t), Request{CacheKey: "double", Code: prog.JS, Event: jsonEvent(t, `{"n":`+n+`}`), Medplum: client})
	}

	// Fill every slot with a run waiting on the backend: the next one is refused.
	var wg sync.WaitGroup
	for i := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, err := run(strconv.Itoa(i)); err != nil || res.Outcome != OutcomeSuccess {
				t.Errorf("run %d: %+v, %v", i, res, err)
			}
		}()
	}
	for range slots {
		<-client.entered
	}
	if _, err := run("0"); !errors.Is(err, ErrBusy) {
		t.Errorf("run beyond the slots: err = %v, want ErrBusy", err)
	}
	close(client.release)
	wg.Wait()

	// Many runs through the slots, each answered with its own input, waiting for a slot as long
	// as they need.
	p.o.QueueTimeout = time.Minute
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := strconv.Itoa(i)
			res, err := run(n)
			if want := `{"n":` + strconv.Itoa(2*i) + `,"id":"` + n + `"}`; err != nil || string(res.Body) != want {
				t.Errorf("run %d: %+v, %v; want %s", i, res, err, want)
			}
		}()
	}
	wg.Wait()
	if n := p.spawns.Load(); n > slots {
		t.Errorf("%d workers started for %d slots", n, slots)
	}
}

func TestPoolSendsCodeOnlyWhenAWorkerLacksIt(t *testing.T) {
	p := newTestPool(t, PoolOptions{Options: Options{MaxConcurrent: 1}})
	v1 := mustCompile(t, "index.js", `exports.handler = () => 'v1'`)
	v2 := mustCompile(t, "index.js", `exports.handler = () => 'v2'`)
	tests := []struct {
		name      string
		key, code string
		want      string
		sends     int64 // code sends so far
	}{
		{"first run", "bot@1", v1.JS, "v1", 1},
		{"same key and code", "bot@1", v1.JS, "v1", 1},
		{"key reused for new code", "bot@1", v2.JS, "v2", 2},
		{"another key, same code", "bot@2", v2.JS, "v2", 2},
		{"no key", "", v1.JS, "v1", 3},
		{"no key again", "", v1.JS, "v1", 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.Run(ctxT(t), Request{CacheKey: tc.key, Code: tc.code})
			if err != nil || string(res.Body) != tc.want {
				t.Fatalf("%+v, %v", res, err)
			}
			if n := p.codeSends.Load(); n != tc.sends {
				t.Errorf("code sent %d times, want %d", n, tc.sends)
			}
		})
	}
}

func TestPoolWorkersGetNoSecretsOrFiles(t *testing.T) {
	t.Setenv("FHIRGATE_TEST_SECRET", "s3cret")
	f, err := os.CreateTemp(t.TempDir(), "open")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // open in the gateway while the worker starts
	p := newTestPool(t, PoolOptions{})
	prog := mustCompile(t, "index.js", `exports.handler = () => typeof process`)
	var w *worker
	res, err := p.Run(ctxT(t), Request{Code: prog.JS, Medplum: hookClient{}, Event: jsonEvent(t, `{}`)})
	if err != nil || string(res.Body) != "undefined" {
		t.Fatalf("%+v, %v", res, err)
	}
	p.mu.Lock()
	w = p.idle[0]
	p.mu.Unlock()

	env, err := os.ReadFile("/proc/" + strconv.Itoa(w.pid) + "/environ")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	vars := strings.Split(strings.TrimRight(string(env), "\x00"), "\x00")
	for _, v := range vars {
		name, _, _ := strings.Cut(v, "=")
		switch name {
		case "PATH", "HOME", "GOMAXPROCS", "GOMEMLIMIT", "TZ", workerEnv:
		default:
			t.Errorf("worker environment has %s", name)
		}
	}
	// The worker opens a few files of its own (the Go runtime reads cgroup limits); what it must
	// not have is any of the gateway's.
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(w.pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		target, _ := os.Readlink("/proc/" + strconv.Itoa(w.pid) + "/fd/" + fd.Name())
		if target == f.Name() || strings.HasPrefix(target, "socket:") {
			t.Errorf("worker has fd %s open on %s", fd.Name(), target)
		}
	}
}

func TestPoolWorkersStop(t *testing.T) {
	p := newTestPool(t, PoolOptions{KeepWorkers: 1, IdleTimeout: 50 * time.Millisecond, Options: Options{MaxConcurrent: 3}})
	prog := mustCompile(t, "index.js", `exports.handler = async (m) => (await m.readResource('Patient', '1')).id`)
	client := newBlockingClient()
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, err := p.Run(ctxT(t), Request{CacheKey: "k", Code: prog.JS, Medplum: client}); err != nil || string(res.Body) != "1" {
				t.Errorf("%+v, %v", res, err)
			}
		}()
	}
	for range 3 {
		<-client.entered
	}
	var workers []*worker
	p.mu.Lock()
	for w := range p.busy {
		workers = append(workers, w)
	}
	p.mu.Unlock()
	close(client.release)
	wg.Wait()

	t.Run("idle workers beyond KeepWorkers retire", func(t *testing.T) {
		waitFor(t, func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return len(p.idle) == 1
		})
		exited := 0
		for _, w := range workers {
			select {
			case <-w.dead:
				exited++
			case <-time.After(5 * time.Second):
			}
		}
		if exited != 2 {
			t.Errorf("%d of 3 workers exited, want 2", exited)
		}
	})
	t.Run("Close stops the rest", func(t *testing.T) {
		_ = p.Close()
		for _, w := range workers {
			select {
			case <-w.dead:
			case <-time.After(5 * time.Second):
				t.Fatalf("worker %d still running after Close", w.pid)
			}
		}
	})
	t.Run("a run after Close gets a worker of its own", func(t *testing.T) {
		before := p.spawns.Load()
		res, err := p.Run(ctxT(t), Request{Code: prog.JS, Medplum: hookClient{func() {}}})
		if err != nil || string(res.Body) != "1" {
			t.Fatalf("%+v, %v", res, err)
		}
		p.mu.Lock()
		idle := len(p.idle)
		p.mu.Unlock()
		if p.spawns.Load() != before+1 || idle != 0 {
			t.Errorf("spawns %d → %d, idle %d", before, p.spawns.Load(), idle)
		}
	})
}

func TestPoolReportsAWorkerThatCannotStart(t *testing.T) {
	tests := []struct {
		name    string
		command []string
	}{
		{"no such executable", []string{"/nonexistent/caddy", "fhirgate", "bot-worker"}},
		{"not a worker", []string{"/bin/true"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPool(PoolOptions{Command: tc.command})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			res, err := p.Run(ctxT(t), Request{Code: `exports.handler = () => 1`})
			if err != nil || res.Outcome != OutcomeError || !strings.Contains(res.Message, "bot worker could not be started") {
				t.Errorf("%+v, %v", res, err)
			}
		})
	}
}

func TestNewPoolRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		o    PoolOptions
		env  string
	}{
		{"no command", PoolOptions{}, ""},
		{"memory below the minimum", PoolOptions{Command: []string{"x"}, WorkerMemory: 1 << 20}, ""},
		{"negative runs per worker", PoolOptions{Command: []string{"x"}, RunsPerWorker: -1}, ""},
		{"inside a worker", PoolOptions{Command: []string{"x"}}, "1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(workerEnv, tc.env)
			}
			if _, err := NewPool(tc.o); err == nil {
				t.Error("NewPool accepted it")
			}
		})
	}
}

func TestPoolRefusesCallsABotCouldNotMake(t *testing.T) {
	tests := []struct {
		name, method, path string
		ok                 bool
	}{
		{"read", "GET", "Patient/1", true},
		{"batch", "POST", "", true},
		{"operation", "POST", "Observation/$validate", true},
		{"escaped id", "GET", "Patient/a%2Db", true},
		{"escaped slash", "GET", "Patient/a%2Fb", false},
		{"escaped slash and dots", "GET", "Patient/..%2f..%2foutside", false},
		{"double-escaped dot segment", "GET", "Patient/%252e%252e/outside", false},
		{"history", "GET", "Patient/1/_history/2", true},
		{"dot segment", "GET", "Patient/../../admin", false},
		{"escaped dot segment", "GET", "Patient/%2e%2e/admin", false},
		{"absolute path", "GET", "/admin", false},
		{"query in the path", "GET", "Patient?_id=1", false},
		{"control character", "GET", "Patient/1\r\nX-Injected: 1", false},
		{"bad escape", "GET", "Patient/%zz", false},
		{"unknown method", "CONNECT", "Patient/1", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkWorkerCall(&doMsg{method: tc.method, path: tc.path})
			if (err == nil) != tc.ok {
				t.Errorf("checkWorkerCall = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

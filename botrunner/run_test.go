package botrunner

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRunEchoesEachInputKind(t *testing.T) {
	const echo = `export async function handler(medplum: any, event: any) { return event.input }`
	tests := []struct {
		name        string
		contentType string
		body        string
		wantBody    string
		wantType    string
	}{
		{"text", "text/plain", "héllo", "héllo", ContentTypeText},
		{"json object", "application/json", `{"a": [1, 2.5, "x", true, null], "__proto__": {"p": 1}}`, `{"a":[1,2.5,"x",true,null],"__proto__":{"p":1}}`, ContentTypeJSON},
		{"json array", "application/json", `[{"b":"\u00e9\n"}]`, `[{"b":"é\n"}]`, ContentTypeJSON},
		{"empty body", "", "", `{}`, ContentTypeJSON},
		{"fhir", "application/fhir+json", `{"resourceType":"Patient","id":"p","birthDate":"2000-01-01"}`, `{"resourceType":"Patient","id":"p","birthDate":"2000-01-01"}`, ContentTypeFHIR},
		{"form", "application/x-www-form-urlencoded", "z=1&a=b+c", `{"a":"b c","z":"1"}`, ContentTypeJSON},
	}
	r := New(Options{})
	p := mustCompile(t, "index.ts", echo)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := Event{ContentType: tc.contentType, Input: mustInput(t, tc.contentType, tc.body)}
			res := runProgram(t, r, p, ev)
			if res.Outcome != OutcomeSuccess {
				t.Fatalf("outcome %v: %s", res.Outcome, res.Message)
			}
			if string(res.Body) != tc.wantBody || res.ContentType != tc.wantType {
				t.Errorf("got %s (%s), want %s (%s)", res.Body, res.ContentType, tc.wantBody, tc.wantType)
			}
		})
	}
}

func TestRunMapsEachResultKind(t *testing.T) {
	tests := []struct {
		name     string
		ret      string
		outcome  Outcome
		wantBody string
		wantType string
		message  string
	}{
		{"string", `'plain text'`, OutcomeSuccess, "plain text", ContentTypeText, ""},
		{"empty string", `''`, OutcomeSuccess, "", ContentTypeText, ""},
		{"resource", `{ resourceType: 'Patient', id: '1' }`, OutcomeSuccess, `{"resourceType":"Patient","id":"1"}`, ContentTypeFHIR, ""},
		{"any resourceType string", `{ resourceType: 'Custom' }`, OutcomeSuccess, `{"resourceType":"Custom"}`, ContentTypeFHIR, ""},
		{"non-string resourceType", `{ resourceType: 1 }`, OutcomeSuccess, `{"resourceType":1}`, ContentTypeJSON, ""},
		{"object", `{ a: 1, b: undefined }`, OutcomeSuccess, `{"a":1}`, ContentTypeJSON, ""},
		{"array", `[1, 'two']`, OutcomeSuccess, `[1,"two"]`, ContentTypeJSON, ""},
		{"number", `42`, OutcomeSuccess, `42`, ContentTypeJSON, ""},
		{"boolean", `false`, OutcomeSuccess, `false`, ContentTypeJSON, ""},
		{"null", `null`, OutcomeSuccess, `null`, ContentTypeJSON, ""},
		{"date", `new Date(0)`, OutcomeSuccess, `"1970-01-01T00:00:00.000Z"`, ContentTypeJSON, ""},
		{"undefined", `undefined`, OutcomeSuccess, `{"resourceType":"OperationOutcome","id":"ok","issue":[{"severity":"information","code":"informational","details":{"text":"All OK"}}]}`, ContentTypeFHIR, ""},
		{"bigint", `10n`, OutcomeError, "", "", "bot result cannot be serialized as JSON: Do not know how to serialize a BigInt"},
		{"cycle", `(() => { const a: any = {}; a.self = a; return a })()`, OutcomeError, "", "", "bot result cannot be serialized as JSON"},
		{"function", `() => 1`, OutcomeError, "", "", "bot returned a function, which cannot be serialized as JSON"},
		{"symbol", `Symbol('s')`, OutcomeError, "", "", "bot returned a symbol, which cannot be serialized as JSON"},
		{"toJSON throws", `{ toJSON() { throw new Error('nope') } }`, OutcomeError, "", "", "bot result cannot be serialized as JSON: nope"},
		// As in Medplum, the host serializes the answer: the bot's own JSON object does not matter.
		{"JSON replaced", `(() => { (globalThis as any).JSON = null; return { a: 1 } })()`, OutcomeSuccess, `{"a":1}`, ContentTypeJSON, ""},
		{"JSON.stringify replaced", `(() => { JSON.stringify = () => 'hacked'; return [1] })()`, OutcomeSuccess, `[1]`, ContentTypeJSON, ""},
		{"toJSON gives undefined", `{ toJSON() { return undefined } }`, OutcomeError, "", "", "bot returned a value whose toJSON gives nothing JSON can express, which cannot be serialized as JSON"},
		{"toJSON gives null", `{ toJSON() { return null } }`, OutcomeSuccess, `null`, ContentTypeJSON, ""},
		{"nested toJSON", `{ when: new Date(0), n: { toJSON: () => 7 } }`, OutcomeSuccess, `{"when":"1970-01-01T00:00:00.000Z","n":7}`, ContentTypeJSON, ""},
		{"resourceType getter throws", `{ get resourceType() { throw new Error('getter') } }`, OutcomeError, "", "", "getter"},
	}
	r := New(Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, r, `export async function handler(): Promise<any> { return `+tc.ret+` }`, jsonEvent(t, `{}`))
			if res.Outcome != tc.outcome {
				t.Fatalf("outcome = %v (%s), want %v", res.Outcome, res.Message, tc.outcome)
			}
			if tc.outcome == OutcomeSuccess {
				if string(res.Body) != tc.wantBody || res.ContentType != tc.wantType {
					t.Errorf("got %s (%s), want %s (%s)", res.Body, res.ContentType, tc.wantBody, tc.wantType)
				}
				return
			}
			if !strings.Contains(res.Message, tc.message) {
				t.Errorf("message = %q, want it to contain %q", res.Message, tc.message)
			}
			assertOutcomeBody(t, res)
		})
	}
}

// assertOutcomeBody checks that a failed run carries its message in an OperationOutcome body.
func assertOutcomeBody(t *testing.T, res *Result) {
	t.Helper()
	if res.ContentType != ContentTypeFHIR {
		t.Errorf("content type = %q", res.ContentType)
	}
	var oo struct {
		ResourceType string
		Issue        []struct {
			Code    string
			Details struct{ Text string }
		}
	}
	if err := json.Unmarshal(res.Body, &oo); err != nil || oo.ResourceType != "OperationOutcome" || len(oo.Issue) != 1 {
		t.Fatalf("body = %s (%v)", res.Body, err)
	}
	if oo.Issue[0].Details.Text != res.Message || oo.Issue[0].Code != "invalid" {
		t.Errorf("issue = %+v, want the message %q", oo.Issue[0], res.Message)
	}
}

func TestRunReportsBotFailures(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		message string
		console string // substring
		outcome string // the body, when the bot threw an OperationOutcome: that outcome as it is
	}{
		{"throw Error", `export function handler() { throw new Error('boom') }`, "boom", "Unhandled error: Error: boom", ""},
		{"reject", `export async function handler() { await null; throw new TypeError('async boom') }`, "async boom", "Unhandled rejection: TypeError: async boom", ""},
		{"throw string", `export function handler() { throw 'just a string' }`, "just a string", "", ""},
		{"throw object with code", `export function handler() { throw { code: 'E_CUSTOM', detail: 1 } }`, "E_CUSTOM", "", ""},
		{"throw plain object", `export function handler() { throw { detail: 1 } }`, `{"detail":1}`, "", ""},
		{"throw undefined", `export function handler() { throw undefined }`, "Unknown error", "", ""},
		{
			"throw OperationOutcomeError",
			`import { OperationOutcomeError, badRequest } from '@medplum/core';
export async function handler() { throw new OperationOutcomeError(badRequest('Invalid birth date', 'Patient.birthDate')) }`,
			"Invalid birth date (Patient.birthDate)", "",
			`{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"invalid","details":{"text":"Invalid birth date"},"expression":["Patient.birthDate"]}]}`,
		},
		{
			"throw OperationOutcomeError with diagnostics only",
			`import { OperationOutcomeError } from '@medplum/core';
export async function handler() {
  throw new OperationOutcomeError({resourceType: 'OperationOutcome', issue: [{severity: 'error', code: 'required', diagnostics: 'Missing required parameter(s): member-name'}]});
}`,
			"Missing required parameter(s): member-name", "",
			`{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"required","diagnostics":"Missing required parameter(s): member-name"}]}`,
		},
		{
			"reject with a medplum client's outcome",
			`import { OperationOutcomeError, notFound } from '@medplum/core';
export async function handler() { await null; throw new OperationOutcomeError(notFound) }`,
			"Not found", "",
			`{"resourceType":"OperationOutcome","id":"not-found","issue":[{"severity":"error","code":"not-found","details":{"text":"Not found"}}]}`,
		},
		{
			"throw OperationOutcome",
			`export function handler() { throw { resourceType: 'OperationOutcome', issue: [{ details: { text: 'a' }, diagnostics: 'd' }, { details: { text: 'b' } }] } }`,
			"a (d); b", "",
			`{"resourceType":"OperationOutcome","issue":[{"details":{"text":"a"},"diagnostics":"d"},{"details":{"text":"b"}}]}`,
		},
		{"never settles", `export function handler() { return new Promise(() => {}) }`, "bot handler's promise never settled", "", ""},
		{"no handler", `export const notTheHandler = 1;`, "bot does not export a handler function", "", ""},
		{"handler not a function", `exports.handler = 42;`, "bot does not export a handler function", "", ""},
		{"throws while loading", `throw new Error('at load time'); export function handler() {}`, "at load time", "", ""},
		{"deep recursion", `function f(n: number): number { return f(n + 1) + 1 }
export function handler() { return f(0) }`, "Maximum call stack size exceeded", "Maximum call stack size exceeded", ""},
		{"deep async recursion", `async function f(n: number): Promise<number> { return (await f(n + 1)) + 1 }
export async function handler() { return f(0) }`, "Maximum call stack size exceeded", "", ""},
		{"handler getter throws", `Object.defineProperty(exports, 'handler', { get() { throw new Error('getter says no') } })`, "getter says no", "", ""},
	}
	r := New(Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, r, tc.src, jsonEvent(t, `{}`))
			if res.Outcome != OutcomeError {
				t.Fatalf("outcome = %v, want error (body %s)", res.Outcome, res.Body)
			}
			if res.Message != tc.message {
				t.Errorf("message = %q, want %q", res.Message, tc.message)
			}
			if !strings.Contains(res.Console, tc.console) {
				t.Errorf("console = %q, want it to contain %q", res.Console, tc.console)
			}
			if tc.outcome != "" {
				if string(res.Body) != tc.outcome || res.ContentType != ContentTypeFHIR {
					t.Errorf("body = %s (%s), want %s", res.Body, res.ContentType, tc.outcome)
				}
				return
			}
			assertOutcomeBody(t, res)
		})
	}
}

func TestRunCapturesConsole(t *testing.T) {
	src := `export async function handler() {
  console.log('plain', 1, true, null, undefined, { a: [1] }, [2, 'x']);
  console.info('info %s is %d%%', 'rate', 42.9);
  console.warn('warn %j %o', 'q', { k: 'v' });
  console.error(new Error('shown with stack'));
  console.debug('debug', 12n, Symbol('s'), function named() {}, () => 1);
  console.dir({ dir: true });
  console.assert(true, 'not shown');
  console.assert(false, 'shown', 1);
  const cyclic: any = {}; cyclic.self = cyclic;
  console.log(cyclic, 'tail');
  console.log('%i %f', '7.9', '2.5');
  console.log('%s', 'only');
  console.log();
}`
	r := New(Options{})
	res := run(t, r, src, jsonEvent(t, `{}`))
	if res.Outcome != OutcomeSuccess {
		t.Fatalf("%v: %s", res.Outcome, res.Message)
	}
	wantLines := []string{
		`plain 1 true null undefined {"a":[1]} [2,"x"]`,
		`[info] info rate is 42.9%`,
		`[warn] warn "q" {"k":"v"}`,
		`[error] Error: shown with stack`,
		`[debug] debug 12n Symbol(s) [Function: named] [Function (anonymous)]`,
		`{"dir":true}`,
		`[error] Assertion failed: shown 1`,
		`[object Object] tail`,
		`7 2.5`,
		`only`,
	}
	for _, want := range wantLines {
		if !strings.Contains(res.Console, want+"\n") {
			t.Errorf("console lacks %q:\n%s", want, res.Console)
		}
	}
	if strings.Contains(res.Console, "not shown") {
		t.Errorf("a passing assert was logged")
	}
	if !strings.Contains(res.Console, "\tat handler (index.ts:5:") {
		t.Errorf("the error's stack is missing:\n%s", res.Console)
	}
}

func TestConsoleKeepsTheLastBytes(t *testing.T) {
	r := New(Options{MaxConsoleBytes: 100})
	res := run(t, r, `export function handler() {
  for (let i = 0; i < 1000; i++) console.log('line ' + i);
  console.log('é'.repeat(30) + ' end');
}`, jsonEvent(t, `{}`))
	if res.Outcome != OutcomeSuccess {
		t.Fatalf("%v: %s", res.Outcome, res.Message)
	}
	if len(res.Console) > 100 || !res.ConsoleTruncated {
		t.Errorf("console is %d bytes (truncated %v), want at most 100", len(res.Console), res.ConsoleTruncated)
	}
	if !strings.HasSuffix(res.Console, " end\n") || !strings.Contains(res.Console, "line 999\n") {
		t.Errorf("console = %q, want the last lines", res.Console)
	}
	if !utf8ValidString(res.Console) {
		t.Errorf("console was cut inside a character: %q", res.Console)
	}

	// A single entry larger than the bound keeps its end.
	res = run(t, r, `export function handler() { console.error('x'.repeat(500) + 'END') }`, jsonEvent(t, `{}`))
	if len(res.Console) != 100 || !strings.HasSuffix(res.Console, "xEND\n") {
		t.Errorf("console = %q", res.Console)
	}
}

func TestRunTimesOut(t *testing.T) {
	tests := []struct {
		name string
		src  string
	}{
		{"sync loop", `export function handler() { while (true) {} }`},
		{"loop after await", `export async function handler() { await Promise.resolve(); while (true) {} }`},
		{"loop in a then callback", `export function handler() { return Promise.resolve().then(() => { for (;;) {} }) }`},
		{"loop while loading", `while (true) {} export function handler() {}`},
		{"loop in a finally", `export async function handler() { try { await null } finally { while (true) {} } }`},
	}
	r := New(Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, "index.ts", tc.src)
			var wg sync.WaitGroup
			var stuck *Result
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				stuck, err = r.Run(ctxT(t), Request{Code: p.JS, Timeout: 200 * time.Millisecond, Event: jsonEvent(t, `{}`)})
				if err != nil {
					t.Error(err)
				}
			}()
			// Another bot runs normally meanwhile.
			other := run(t, r, `export const handler = () => 'fine'`, jsonEvent(t, `{}`))
			wg.Wait()
			if other.Outcome != OutcomeSuccess || string(other.Body) != "fine" {
				t.Errorf("concurrent run: %v %s", other.Outcome, other.Message)
			}
			if stuck == nil || stuck.Outcome != OutcomeTimeout {
				t.Fatalf("stuck run = %+v, want a timeout", stuck)
			}
			if stuck.Message != "bot execution timed out after 200ms" {
				t.Errorf("message = %q", stuck.Message)
			}
			assertOutcomeBody(t, stuck)
		})
	}
}

func TestDefaultTimeoutApplies(t *testing.T) {
	r := New(Options{DefaultTimeout: 100 * time.Millisecond})
	p := mustCompile(t, "index.js", `exports.handler = () => { for (;;) {} }`)
	res, err := r.Run(ctxT(t), Request{Code: p.JS})
	if err != nil || res.Outcome != OutcomeTimeout || res.Message != "bot execution timed out after 100ms" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

// A toJSON that never returns is stopped by the deadline like any other code, although goja's
// serializer, not bot code, called it.
func TestTimeoutStopsResultSerialization(t *testing.T) {
	r := New(Options{DefaultTimeout: 100 * time.Millisecond})
	p := mustCompile(t, "index.js", `exports.handler = async () => ({ a: { toJSON() { for (;;) {} } } })`)
	res, err := r.Run(ctxT(t), Request{Code: p.JS})
	if err != nil || res.Outcome != OutcomeTimeout || res.Message != "bot execution timed out after 100ms" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

// cancellingClient cancels the run's context from inside the run, so the test does not depend on
// when the run starts.
type cancellingClient struct{ cancel context.CancelFunc }

func (c cancellingClient) Do(context.Context, string, string, url.Values, []byte, string, http.Header) (int, string, []byte, error) {
	c.cancel()
	return 200, "application/fhir+json", []byte(`{"resourceType":"Patient","id":"1"}`), nil
}

func TestContextEndsTheRun(t *testing.T) {
	checkContextEndsTheRun(t, New(Options{}))
}

// checkContextEndsTheRun is the cancellation contract every Executor keeps:
// a cancelled caller gets the interrupted run with context.Canceled, a
// caller's deadline ends the run as a timeout, and an already cancelled
// context runs nothing.
func checkContextEndsTheRun(t *testing.T, e Executor) {
	t.Helper()
	p := mustCompile(t, "index.ts", `export async function handler(medplum: any) {
  console.log('started');
  await medplum.readResource('Patient', '1');
  for (;;) {}
}`)

	ctx, cancel := context.WithCancel(context.Background())
	res, err := e.Run(ctx, Request{Code: p.JS, Timeout: 10 * time.Second, Medplum: cancellingClient{cancel}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if res == nil || res.Outcome != OutcomeError || res.Message != cancelledMessage || res.Console != "started\n" {
		t.Errorf("result = %+v", res)
	}

	loop := mustCompile(t, "index.js", `exports.handler = () => { for (;;) {} }`)
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err = e.Run(ctx, Request{Code: loop.JS, Timeout: 10 * time.Second})
	if err != nil || res.Outcome != OutcomeTimeout || res.Message != deadlineMessage {
		t.Errorf("Run = %+v, %v; want a timeout result", res, err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := e.Run(ctx, Request{Code: loop.JS}); !errors.Is(err, context.Canceled) {
		t.Errorf("already cancelled: err = %v", err)
	}
}

func TestSandboxHasNoHostAccess(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want string
	}{
		{"require fs", `(() => { try { require('fs'); return 'loaded' } catch (e: any) { return e.message + ' / ' + e.code } })()`,
			"Cannot find module 'fs' (the bot sandbox provides only '@medplum/core', 'buffer', 'crypto', 'timers', 'timers/promises', 'node-fetch' and 'form-data') / MODULE_NOT_FOUND"},
		{"require child_process", `(() => { try { require('child_process'); return 'loaded' } catch (e: any) { return e.message } })()`,
			"Cannot find module 'child_process' (the bot sandbox provides only '@medplum/core', 'buffer', 'crypto', 'timers', 'timers/promises', 'node-fetch' and 'form-data')"},
		{"require node:http", `(() => { try { require('node:http'); return 'loaded' } catch (e: any) { return e.message } })()`,
			"Cannot find module 'node:http' (the bot sandbox provides only '@medplum/core', 'buffer', 'crypto', 'timers', 'timers/promises', 'node-fetch' and 'form-data')"},
		{"dynamic import", `await import('os').then(() => 'loaded', (e: any) => e.message)`,
			"Cannot find module 'os' (the bot sandbox provides only '@medplum/core', 'buffer', 'crypto', 'timers', 'timers/promises', 'node-fetch' and 'form-data')"},
		{"process", `typeof process`, "undefined"},
		{"fetch without egress", `await fetch('http://127.0.0.1:1/').then(() => 'reached', (e: any) => e.message)`,
			"fetch failed: fetch is not available: the gateway gives this bot no egress"},
		{"globalThis.process", `String((globalThis as any).process)`, "undefined"},
		{"fhirtypes", `JSON.stringify(require('@medplum/fhirtypes'))`, "{}"},
		{"eval source map", `eval('1 + 1\n//# sourceMappingURL=/dev/zero')`, "2"},
		{"Function constructor", `new Function('return 40 + 2')()`, "42"},
	}
	r := New(Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, r, `export async function handler() { return String(`+tc.expr+`) }`, jsonEvent(t, `{}`))
			if res.Outcome != OutcomeSuccess || string(res.Body) != tc.want {
				t.Errorf("got %v %q %s, want %q", res.Outcome, res.Body, res.Message, tc.want)
			}
		})
	}
}

func TestEventCarriesMedplumFields(t *testing.T) {
	s, yes, n, d := "s3cret", true, int64(7), 2.5
	ev := Event{
		Bot:         Reference{Reference: "Bot/b1", Display: "Echo"},
		ContentType: "application/json; charset=utf-8",
		Input:       mustInput(t, MediaJSON, `{"x":1}`),
		Secrets: map[string]Secret{
			"API_KEY": {Name: "API_KEY", ValueString: &s},
			"FLAG":    {ValueBoolean: &yes},
			"N":       {Name: "N", ValueInteger: &n},
			"D":       {Name: "D", ValueDecimal: &d},
		},
		TraceID:   "trace-1",
		Requester: &Reference{Reference: "Practitioner/p1"},
		Headers: map[string]string{
			"x-custom": "1", "Authorization": "Bearer t", "cookie": "c=1", "proxy-authorization": "Basic x", "Accept": "*/*",
		},
	}
	r := New(Options{})
	res := run(t, r, `export async function handler(m: any, event: any) { return event }`, ev)
	if res.Outcome != OutcomeSuccess {
		t.Fatalf("%v: %s", res.Outcome, res.Message)
	}
	want := `{"bot":{"reference":"Bot/b1","display":"Echo"},"contentType":"application/json; charset=utf-8","input":{"x":1},` +
		`"secrets":{"API_KEY":{"name":"API_KEY","valueString":"s3cret"},"D":{"name":"D","valueDecimal":2.5},` +
		`"FLAG":{"name":"FLAG","valueBoolean":true},"N":{"name":"N","valueInteger":7}},"traceId":"trace-1",` +
		`"requester":{"reference":"Practitioner/p1"},"headers":{"accept":"*/*","x-custom":"1"}}`
	if string(res.Body) != want {
		t.Errorf("event =\n%s\nwant\n%s", res.Body, want)
	}
	if ev.Headers["Authorization"] != "Bearer t" {
		t.Errorf("the caller's headers were modified")
	}

	res = run(t, r, `export async function handler(m: any, event: any) { return event }`, Event{})
	if string(res.Body) != `{"bot":{"reference":""},"input":{},"secrets":{},"headers":{}}` {
		t.Errorf("empty event = %s", res.Body)
	}
}

func TestRunnerIsBusyWhenSaturated(t *testing.T) {
	r := New(Options{MaxConcurrent: 2, QueueTimeout: 50 * time.Millisecond})
	p := mustCompile(t, "index.js", `exports.handler = () => { for (;;) {} }`)
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Run(ctxT(t), Request{Code: p.JS, Timeout: 2 * time.Second})
			if err != nil || res.Outcome != OutcomeTimeout {
				t.Errorf("looping run = %+v, %v", res, err)
			}
		}()
	}
	waitFor(t, func() bool { return r.slots.Running() == 2 })
	if _, err := r.Run(ctxT(t), Request{Code: `exports.handler = () => 1`}); !errors.Is(err, ErrBusy) {
		t.Errorf("err = %v, want ErrBusy", err)
	}
	wg.Wait()
	res, err := r.Run(ctxT(t), Request{Code: `exports.handler = () => 1`})
	if err != nil || res.Outcome != OutcomeSuccess {
		t.Errorf("after the loops ended: %+v, %v", res, err)
	}
}

func TestPerBotLimit(t *testing.T) {
	r := New(Options{MaxConcurrent: 10, QueueTimeout: 50 * time.Millisecond})
	loop := mustCompile(t, "index.js", `exports.handler = () => { for (;;) {} }`)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.Run(ctxT(t), Request{Code: loop.JS, BotID: "a", MaxConcurrent: 1, Timeout: 2 * time.Second})
	}()
	waitFor(t, func() bool { return r.slots.Running() == 1 })
	if _, err := r.Run(ctxT(t), Request{Code: loop.JS, BotID: "a", MaxConcurrent: 1}); !errors.Is(err, ErrBusy) {
		t.Errorf("second run of bot a: err = %v, want ErrBusy", err)
	}
	res, err := r.Run(ctxT(t), Request{Code: `exports.handler = () => 'b'`, BotID: "b", MaxConcurrent: 1})
	if err != nil || string(res.Body) != "b" {
		t.Errorf("bot b: %+v, %v", res, err)
	}
	<-done
	waitFor(t, func() bool {
		r.slots.mu.Lock()
		defer r.slots.mu.Unlock()
		return len(r.slots.perBot) == 0
	})
}

func TestProgramsAreCachedByKey(t *testing.T) {
	r := New(Options{ProgramCacheSize: 2})
	code := func(s string) string { return `exports.handler = () => '` + s + `'` }
	runKey := func(key, c string) string {
		t.Helper()
		res, err := r.Run(ctxT(t), Request{CacheKey: key, Code: c})
		if err != nil || res.Outcome != OutcomeSuccess {
			t.Fatalf("Run(%s) = %+v, %v", key, res, err)
		}
		return string(res.Body)
	}
	steps := []struct {
		key, code, want string
		compiles        int64
	}{
		{"bot1@1", code("v1"), "v1", 1},
		{"bot1@1", code("v1"), "v1", 1}, // hit
		{"bot2@1", code("b2"), "b2", 2},
		{"bot1@1", code("v1"), "v1", 2}, // hit, now most recent
		{"bot3@1", code("b3"), "b3", 3}, // evicts bot2
		{"bot1@1", code("v1"), "v1", 3},
		{"bot2@1", code("b2"), "b2", 4}, // was evicted
		{"bot1@1", code("v2"), "v2", 5}, // same key, new code: recompiled, not stale
		{"", code("nokey"), "nokey", 6},
		{"", code("nokey"), "nokey", 7}, // no key, no caching
	}
	for i, s := range steps {
		if got := runKey(s.key, s.code); got != s.want {
			t.Errorf("step %d: body %q, want %q", i, got, s.want)
		}
		if got := r.compiles.Load(); got != s.compiles {
			t.Errorf("step %d: %d compiles, want %d", i, got, s.compiles)
		}
	}
	if n := r.cache.len(); n != 2 {
		t.Errorf("cache holds %d programs, want 2", n)
	}

	// A Program from Compile is used as is.
	p := mustCompile(t, "index.js", code("precompiled"))
	res, err := r.Run(ctxT(t), Request{Program: p})
	if err != nil || string(res.Body) != "precompiled" || r.compiles.Load() != 7 {
		t.Errorf("Run(Program) = %+v, %v (compiles %d)", res, err, r.compiles.Load())
	}
}

func TestCodeThatDoesNotLoadIsAnErrorResult(t *testing.T) {
	r := New(Options{})
	res, err := r.Run(ctxT(t), Request{Code: "exports.handler = (", Filename: "index.js"})
	if err != nil || res.Outcome != OutcomeError || !strings.HasPrefix(res.Message, "loading bot code: index.js:") {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	assertOutcomeBody(t, res)
}

func TestResultSizeIsBounded(t *testing.T) {
	r := New(Options{MaxResultBytes: 1000})
	res := run(t, r, `export const handler = () => 'x'.repeat(1001)`, jsonEvent(t, `{}`))
	if res.Outcome != OutcomeError || res.Message != "bot result is 1001 bytes, more than the limit of 1000" {
		t.Errorf("string: %v %q", res.Outcome, res.Message)
	}
	res = run(t, r, `export const handler = () => ({ a: 'x'.repeat(1000) })`, jsonEvent(t, `{}`))
	if res.Outcome != OutcomeError || !strings.HasPrefix(res.Message, "bot result is 1008 bytes") {
		t.Errorf("object: %v %q", res.Outcome, res.Message)
	}
	res = run(t, r, `export const handler = () => 'x'.repeat(1000)`, jsonEvent(t, `{}`))
	if res.Outcome != OutcomeSuccess {
		t.Errorf("at the limit: %v %q", res.Outcome, res.Message)
	}
}

// A bot that misbehaves in every way at once leaves concurrent well-behaved runs untouched.
func TestMisbehavingBotsDoNotAffectOthers(t *testing.T) {
	r := New(Options{MaxConsoleBytes: 1 << 10})
	bad := []string{
		`export function handler() { while (true) {} }`,
		`export function handler() { throw new Error('x') }`,
		`export function handler() { for (let i = 0; i < 1e5; i++) console.log('flood', i) }`,
		`export function handler() { return () => 1 }`,
		`export function handler() { (globalThis as any).JSON = null; Object.prototype.toJSON = () => 'hacked'; return {} }`,
		`export function handler() { function f(): any { return f() } return f() }`,
	}
	good := mustCompile(t, "index.ts", `export function handler(m: any, e: any) { console.log('ok', e.input.n); return { n: e.input.n * 2 } }`)
	var wg sync.WaitGroup
	for i, src := range bad {
		p := mustCompile(t, "index.ts", src)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Run(ctxT(t), Request{Code: p.JS, Timeout: 300 * time.Millisecond}); err != nil {
				t.Errorf("bad bot %d: %v", i, err)
			}
		}()
	}
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Run(ctxT(t), Request{CacheKey: "good", Code: good.JS, Event: jsonEvent(t, `{"n": 21}`)})
			if err != nil || res.Outcome != OutcomeSuccess || string(res.Body) != `{"n":42}` || res.Console != "ok 21\n" {
				t.Errorf("good run %d: %+v, %v", i, res, err)
			}
		}()
	}
	wg.Wait()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func utf8ValidString(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

package botrunner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// The Compiler tests start real compile processes: this test binary, which TestMain turns into
// one when the Compiler marks its environment.

func newTestCompiler(t *testing.T, o CompilerOptions) *Compiler {
	t.Helper()
	o.Command = testWorkerCommand()
	c, err := NewCompiler(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NestingShapes returns sources that nest one construct depth times. Each overflowed the Go
// stack of esbuild's parser (or goja's) in the gateway at depth 300,000 before compiles ran in
// their own process, which killed the gateway.
func nestingShapes(depth int) map[string]string {
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

// plusChain is 1+1+…+1 with n terms: flat, so no nesting bound catches it, yet goja's compiler
// (which cannot be interrupted) spent some 40 s of CPU on 100,000 terms.
func plusChain(n int) string {
	return "exports.handler = () => 1" + strings.Repeat("+1", n-1) + ";"
}

func TestCompilerCompilesTypeScriptInAProcess(t *testing.T) {
	c := newTestCompiler(t, CompilerOptions{})
	src := "import { MedplumClient } from '@medplum/core';\n" +
		"export async function handler(m: MedplumClient, e: { input: { n: number } }): Promise<number> { return e.input.n * 2 }\n"
	p, err := c.Compile(context.Background(), "p", "index.ts", src)
	if err != nil {
		t.Fatal(err)
	}
	if c.spawns.Load() != 1 {
		t.Fatalf("%d compile processes started, want 1", c.spawns.Load())
	}
	if strings.Contains(p.JS, "Promise<number>") || !strings.Contains(p.JS, "sourceMappingURL=data:") {
		t.Fatalf("compiled code:\n%s", p.JS)
	}
	want, err := Compile("index.ts", src)
	if err != nil {
		t.Fatal(err)
	}
	if p.JS != want.JS {
		t.Fatalf("the process compiled\n%s\nCompile gives\n%s", p.JS, want.JS)
	}
	res := runProgram(t, New(Options{}), p, jsonEvent(t, `{"n":21}`))
	if res.Outcome != OutcomeSuccess || string(res.Body) != "42" {
		t.Fatalf("run: %v %s %s", res.Outcome, res.Message, res.Body)
	}
}

func TestCompilerReportsSyntaxErrorLineAndColumn(t *testing.T) {
	c := newTestCompiler(t, CompilerOptions{})
	_, err := c.Compile(context.Background(), "p", "index.ts", "export async function handler() {\n  const x = 1 +;\n}\n")
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want a *CompileError", err, err)
	}
	if ce.File != "index.ts" || ce.Line != 2 || ce.Column != 15 || !strings.Contains(ce.Message, "Unexpected \";\"") {
		t.Fatalf("error %+v", ce)
	}
}

func TestCompilerSurvivesDeeplyNestedSource(t *testing.T) {
	const depth = 300_000 // each overflowed the gateway's stack when it compiled in process
	for name, src := range nestingShapes(depth) {
		t.Run(name, func(t *testing.T) {
			c := newTestCompiler(t, CompilerOptions{})
			_, err := c.Compile(context.Background(), "p", "index.js", src)
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T), want a *CompileError", err, err)
			}
			t.Logf("%d KiB: %v", len(src)>>10, ce)
			if ce.File != "index.js" || ce.Message == "" {
				t.Fatalf("error %+v", ce)
			}
		})
	}
}

func TestCompilerKillsACompilePastItsTimeout(t *testing.T) {
	c := newTestCompiler(t, CompilerOptions{Timeout: time.Second})
	start := time.Now()
	_, err := c.Compile(context.Background(), "p", "index.js", plusChain(100_000))
	took := time.Since(start)
	var ce *CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Message, "longer than the limit of 1s") || !strings.Contains(ce.Message, "bot_compile_timeout") {
		t.Fatalf("error %v, want a CompileError naming the 1s limit", err)
	}
	// The bound the issue states: killed at the timeout, not after goja's ~40 s. Generous for a
	// loaded machine.
	if took > 10*time.Second {
		t.Fatalf("the compile took %v with a 1s limit", took)
	}
}

func TestCompilerBoundsConcurrentCompilesPerProject(t *testing.T) {
	c := newTestCompiler(t, CompilerOptions{MaxConcurrent: 3, MaxPerProject: 2, QueueTimeout: 200 * time.Millisecond})
	// Hold the slots directly: a compile that takes long enough to hold one is timing-dependent.
	ctx := context.Background()
	var releases []func()
	for range 2 {
		release, err := c.slots.acquire(ctx, "a", time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	if _, err := c.Compile(ctx, "a", "index.js", "exports.handler = () => 1"); !errors.Is(err, ErrCompileBusy) {
		t.Fatalf("third compile of project a: %v, want ErrCompileBusy", err)
	}
	if _, err := c.Compile(ctx, "b", "index.js", "exports.handler = () => 1"); err != nil {
		t.Fatalf("project b is not held up by project a: %v", err)
	}
	release, err := c.slots.acquire(ctx, "b", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compile(ctx, "c", "index.js", "exports.handler = () => 1"); !errors.Is(err, ErrCompileBusy) {
		t.Fatalf("a compile beyond MaxConcurrent: %v, want ErrCompileBusy", err)
	}
	// A waiting compile takes the slot given back.
	var wg sync.WaitGroup
	wg.Add(1)
	var waited error
	go func() {
		defer wg.Done()
		_, waited = c.Compile(ctx, "a", "index.js", "exports.handler = () => 1")
	}()
	time.Sleep(50 * time.Millisecond)
	releases[0]()
	wg.Wait()
	if waited != nil {
		t.Fatalf("the waiting compile: %v", waited)
	}
	releases[1]()
	release()
	if c.spawns.Load() != 2 {
		t.Fatalf("%d compile processes started, want 2 (busy compiles start none)", c.spawns.Load())
	}
}

func TestCompilerCheckRemembersItsVerdicts(t *testing.T) {
	c := newTestCompiler(t, CompilerOptions{})
	ctx := context.Background()
	p, err := c.Compile(ctx, "p", "index.js", "exports.handler = () => 1")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(ctx, "index.js", p.JS); err != nil || c.spawns.Load() != 1 {
		t.Fatalf("checking the Compiler's own output: %v, %d processes", err, c.spawns.Load())
	}
	deep := "exports.handler = () => " + strings.Repeat("(", 300_000) + "1" + strings.Repeat(")", 300_000) + ";"
	for range 2 {
		var ce *CompileError
		if err := c.Check(ctx, "index.js", deep); !errors.As(err, &ce) {
			t.Fatalf("checking deeply nested code: %v", err)
		}
	}
	if c.spawns.Load() != 2 {
		t.Fatalf("%d compile processes started, want 2 (one check of the nested code)", c.spawns.Load())
	}
}

// An in-process Runner never compiles code on its own stack that its Compiler has not seen
// load: stored code that predates compile processes is checked in one first.
func TestRunnerChecksUnseenCodeInACompileProcess(t *testing.T) {
	// Long enough for the nested code to crash its process on a loaded machine; far too short
	// for the chain.
	c := newTestCompiler(t, CompilerOptions{Timeout: 3 * time.Second})
	r := New(Options{Compiler: c})
	ctx := ctxT(t)
	req := func(key, code string) Request {
		return Request{CacheKey: key, Code: code, Filename: "index.js", Timeout: 5 * time.Second, Event: jsonEvent(t, `{}`)}
	}
	// Code that nests past the compile process's stack: in this process, which has the default
	// 1 GB stack, the parser would still recurse 300,000 times before it failed or crashed.
	deep := "exports.handler = () => " + strings.Repeat("[", 300_000) + strings.Repeat("]", 300_000) + ";"
	res, err := r.Run(ctx, req("deep", deep))
	if err != nil || res.Outcome != OutcomeError || !strings.Contains(res.Message, "nested too deeply") {
		t.Fatalf("deep: %v %+v", err, res)
	}
	res, err = r.Run(ctx, req("chain", plusChain(100_000)))
	if err != nil || res.Outcome != OutcomeError || !strings.Contains(res.Message, "bot_compile_timeout") {
		t.Fatalf("chain: %v %+v", err, res)
	}
	if r.compiles.Load() != 0 {
		t.Fatalf("the runner compiled %d programs itself, want 0", r.compiles.Load())
	}
	// Code the Compiler produced runs without another process; unseen good code costs one check.
	p, err := c.Compile(ctx, "p", "index.js", "exports.handler = () => 7")
	if err != nil {
		t.Fatal(err)
	}
	spawns := c.spawns.Load()
	unseen := fmt.Sprintf("exports.handler = () => 8 // %d", time.Now().UnixNano())
	for _, code := range []string{p.JS, unseen} {
		res, err = r.Run(ctx, req(code, code))
		if err != nil || res.Outcome != OutcomeSuccess {
			t.Fatalf("run: %v %+v", err, res)
		}
	}
	if c.spawns.Load() != spawns+1 {
		t.Fatalf("%d compile processes for two runs, want 1 (for the unseen code)", c.spawns.Load()-spawns)
	}
	// After a config reload (a new Compiler and Runner), code seen load is not checked again.
	c2 := newTestCompiler(t, CompilerOptions{})
	r2 := New(Options{Compiler: c2})
	for _, code := range []string{p.JS, unseen} {
		if res, err = r2.Run(ctx, req(code, code)); err != nil || res.Outcome != OutcomeSuccess {
			t.Fatalf("run after the reload: %v %+v", err, res)
		}
	}
	if c2.spawns.Load() != 0 {
		t.Fatalf("%d compile processes after the reload, want 0", c2.spawns.Load())
	}
}

// The cost of a compile process: compare with BenchmarkCompileInProcess (same source).
const benchCompileSource = `import { BotEvent, MedplumClient } from '@medplum/core';
interface Input { patientId: string; value: number }
export async function handler(medplum: MedplumClient, event: BotEvent<Input>): Promise<any> {
  const input = event.input as Input;
  return { resourceType: 'Observation', status: 'final', subject: { reference: 'Patient/' + input.patientId }, valueQuantity: { value: input.value } };
}
`

func BenchmarkCompilerProcess(b *testing.B) {
	c, err := NewCompiler(CompilerOptions{Command: testWorkerCommand()})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := c.Compile(context.Background(), "p", "index.ts", benchCompileSource); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompileInProcess(b *testing.B) {
	for b.Loop() {
		if _, err := Compile("index.ts", benchCompileSource); err != nil {
			b.Fatal(err)
		}
	}
}

// A bot worker compiles stored code on a cache miss inside the run: code that nests too deeply
// crashes only that worker, and a compile that outlasts the run is killed with it.
func TestPoolWorkerCompileIsBoundedByTheRun(t *testing.T) {
	p := newTestPool(t, PoolOptions{})
	ctx := ctxT(t)
	deep := "exports.handler = () => " + strings.Repeat("[", 300_000) + strings.Repeat("]", 300_000) + ";"
	res, err := p.Run(ctx, Request{CacheKey: "deep", Code: deep, BotID: "deep", Timeout: 5 * time.Second, Event: jsonEvent(t, `{}`)})
	if err != nil || res.Outcome != OutcomeError || !strings.Contains(res.Message, "crashed") {
		t.Fatalf("deep: %v %+v", err, res)
	}
	start := time.Now()
	res, err = p.Run(ctx, Request{CacheKey: "chain", Code: plusChain(100_000), BotID: "chain", Timeout: time.Second, Event: jsonEvent(t, `{}`)})
	if err != nil || res.Outcome == OutcomeSuccess || !strings.Contains(res.Message, "deadline") {
		t.Fatalf("chain: %v %+v", err, res)
	}
	// Killed at the run's deadline plus killGrace, not after goja's ~40 s; generous for load.
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("the run answered after %v with a 1s timeout", took)
	}
	res, err = p.Run(ctx, Request{CacheKey: "ok", Code: "exports.handler = () => 3", BotID: "ok", Timeout: 5 * time.Second, Event: jsonEvent(t, `{}`)})
	if err != nil || res.Outcome != OutcomeSuccess || string(res.Body) != "3" {
		t.Fatalf("the pool after both: %v %+v", err, res)
	}
}

func TestCompilerKillsACompilePastItsMemory(t *testing.T) {
	c := newTestCompiler(t, CompilerOptions{Memory: MinWorkerMemory, Timeout: time.Minute})
	// 7.5 MiB of statements: esbuild's and goja's trees of it take several hundred MiB.
	src := "const x = [];\nexports.handler = () => x.length;\n" + strings.Repeat("x.push(1);\n", 700_000)
	_, err := c.Compile(context.Background(), "p", "index.js", src)
	var ce *CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Message, "memory limit of 64 MiB") {
		t.Fatalf("error %v, want a CompileError naming the 64 MiB limit", err)
	}
}

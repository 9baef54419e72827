package botrunner

import (
	"errors"
	"strings"
	"testing"
)

func TestCompileAcceptsEveryModuleShape(t *testing.T) {
	tests := []struct {
		name     string
		filename string
		src      string
		want     string // JSON body of the bot's answer to {"n": 2}
	}{
		{
			name:     "TypeScript with types, interfaces and enums",
			filename: "index.ts",
			src: `import { BotEvent, MedplumClient } from '@medplum/core';
interface Input { n: number }
enum Scale { Double = 2, Triple = 3 }
type Out = { result: number };
export async function handler(medplum: MedplumClient, event: BotEvent<Input>): Promise<Out> {
  const input = event.input as Input;
  return { result: input.n * Scale.Triple };
}`,
			want: `{"result":6}`,
		},
		{
			name:     "ESM export async function",
			filename: "index.mjs",
			src:      `export async function handler(medplum, event) { return { result: event.input.n + 1 } }`,
			want:     `{"result":3}`,
		},
		{
			name:     "ESM export const arrow",
			filename: "index.js",
			src:      `export const handler = async (medplum, event) => ({ result: event.input.n * 10 });`,
			want:     `{"result":20}`,
		},
		{
			name:     "ESM default export object",
			filename: "index.js",
			src:      `export default { async handler(medplum, event) { return { result: -event.input.n } } };`,
			want:     `{"result":-2}`,
		},
		{
			name:     "ESM default export function",
			filename: "index.ts",
			src:      `export default async function (medplum: unknown, event: any) { return { result: event.input.n } }`,
			want:     `{"result":2}`,
		},
		{
			name:     "CommonJS exports.handler",
			filename: "index.js",
			src:      `exports.handler = async function (medplum, event) { return { result: event.input.n * 2 } };`,
			want:     `{"result":4}`,
		},
		{
			name:     "CommonJS module.exports.handler",
			filename: "index.cjs",
			src:      `module.exports.handler = (medplum, event) => ({ result: event.input.n - 1 });`,
			want:     `{"result":1}`,
		},
		{
			name:     "CommonJS module.exports = {handler}",
			filename: "index.js",
			src:      "async function handler(medplum, event) { return { result: 7 } }\nmodule.exports = { handler };",
			want:     `{"result":7}`,
		},
		{
			name:     "CommonJS module.exports = function",
			filename: "index.js",
			src:      `module.exports = async (medplum, event) => ({ result: 8 });`,
			want:     `{"result":8}`,
		},
		{
			name:     "value and type imports from @medplum/core",
			filename: "index.ts",
			src: `import { createReference, getReferenceString, Hl7Message } from '@medplum/core';
import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Patient } from '@medplum/fhirtypes';
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<any> {
  const p: Patient = { resourceType: 'Patient', id: 'p1' };
  return { ref: createReference(p), s: getReferenceString(p), hl7: typeof Hl7Message };
}`,
			want: `{"ref":{"reference":"Patient/p1"},"s":"Patient/p1","hl7":"function"}`,
		},
		{
			name:     "namespace import of @medplum/core",
			filename: "index.ts",
			src: `import * as core from '@medplum/core';
export const handler = async () => ({ s: core.getReferenceString({ resourceType: 'Bot', id: 'b' } as any) });`,
			want: `{"s":"Bot/b"}`,
		},
		{
			name:     "ESM re-export of @medplum/core beside the handler",
			filename: "index.ts",
			src: `export * from '@medplum/core';
export { createReference as ref } from '@medplum/core';
export let runs = 0;
export async function handler() { runs++; return { runs } }`,
			want: `{"runs":1}`,
		},
		{
			name:     "async generators and for await are lowered",
			filename: "index.ts",
			src: `async function* counter(n: number) { for (let i = 1; i <= n; i++) { await null; yield i } }
export async function handler(medplum: unknown, event: { input: { n: number } }) {
  let sum = 0;
  for await (const i of counter(event.input.n + 2)) sum += i;
  return { result: sum };
}`,
			want: `{"result":10}`,
		},
		{
			name:     "modern syntax goja runs natively",
			filename: "index.ts",
			src: `class Box { #v = 0; static made = 0; static { Box.made = 1 } constructor(v: number) { this.#v = v } get v() { return this.#v } }
export async function handler(medplum: unknown, event: any) {
  const o = { a: { b: null as null | { c: number } } };
  let x: number | undefined;
  x ??= 5;
  const { n, ...rest } = { n: event.input.n, m: 1 };
  return { result: new Box(n).v + (o.a.b?.c ?? x) + Object.keys(rest).length + Box.made + 2 ** 3, big: String(2n ** 64n) };
}`,
			want: `{"result":17,"big":"18446744073709551616"}`,
		},
	}
	r := New(Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, tc.filename, tc.src)
			res := runProgram(t, r, p, jsonEvent(t, `{"n": 2}`))
			if res.Outcome != OutcomeSuccess {
				t.Fatalf("outcome %v: %s\nconsole: %s\ncode:\n%s", res.Outcome, res.Message, res.Console, p.JS)
			}
			if got := string(res.Body); got != tc.want {
				t.Errorf("body = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestCompileDirectExports pins the text of esbuild's ESM-to-CommonJS helpers that Compile
// replaces with cheaper equivalents: after an esbuild upgrade that writes them differently this
// fails, and the replacements must follow (bots still run; they only lose the speed).
func TestCompileDirectExports(t *testing.T) {
	p := mustCompile(t, "index.ts", `export async function handler() { return 1 }`)
	for _, r := range helperRewrites {
		if !strings.Contains(p.JS, r.direct) || strings.Contains(p.JS, r.esbuild) {
			t.Fatalf("esbuild's helper %q was not replaced; compiled code:\n%s", r.esbuild, p.JS)
		}
	}
	if cjs := mustCompile(t, "index.js", `exports.handler = () => 1`); strings.Contains(cjs.JS, "__toCommonJS") {
		t.Errorf("CommonJS gained a helper:\n%s", cjs.JS)
	}
}

func TestCompileErrorNamesLineAndColumn(t *testing.T) {
	tests := []struct {
		name     string
		filename string
		src      string
		line     int
		column   int
		message  string
		text     string // substring of Error()
	}{
		{
			name:     "TypeScript syntax error",
			filename: "index.ts",
			src:      "export async function handler() {\n  const a = 1;\n  const b = 2 x;\n}\n",
			line:     3, column: 14,
			message: `Expected ";" but found "x"`,
			text:    `index.ts:3:14: Expected ";" but found "x"`,
		},
		{
			name:     "JavaScript unterminated string",
			filename: "bot.js",
			src:      "exports.handler = () => 'oops;\n",
			line:     1, column: 30,
			message: "Unterminated string literal",
			text:    "bot.js:1:30: Unterminated string literal",
		},
		{
			name:     "type annotation in a .js file",
			filename: "index.js",
			src:      "export function handler(m: any) {}\n",
			line:     1, column: 25,
			message: `Expected ")" but found ":"`,
		},
		{
			name:     "top-level await cannot become CommonJS",
			filename: "index.ts",
			src:      "const x = await Promise.resolve(1);\nexport const handler = () => x;\n",
			line:     1, column: 10,
		},
		{
			name:     "unsupported extension",
			filename: "index.py",
			src:      "print(1)",
			text:     `index.py: unsupported file extension ".py"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.filename, tc.src)
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v (%T), want *CompileError", err, err)
			}
			if ce.Line != tc.line || ce.Column != tc.column {
				t.Errorf("position = %d:%d, want %d:%d (%v)", ce.Line, ce.Column, tc.line, tc.column, err)
			}
			if tc.message != "" && ce.Message != tc.message {
				t.Errorf("message = %q, want %q", ce.Message, tc.message)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("Error() = %q, want it to contain %q", err.Error(), tc.text)
			}
		})
	}
}

func TestCompileDefaultsToJavaScript(t *testing.T) {
	p, err := Compile("", "exports.handler = () => 1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.JS, "exports.handler") {
		t.Errorf("JS = %q", p.JS)
	}
}

func TestCompileWarningsDoNotFail(t *testing.T) {
	p := mustCompile(t, "index.ts", "export const handler = () => typeof import.meta;\n")
	if len(p.Warnings) == 0 {
		t.Fatalf("no warning for import.meta in CommonJS")
	}
	if !strings.HasPrefix(p.Warnings[0], "index.ts:1:") {
		t.Errorf("warning = %q, want a position", p.Warnings[0])
	}
}

func TestStackTracesPointIntoTheSource(t *testing.T) {
	src := "export async function handler() {\n  const x: number = 1;\n  throw new Error('at line three');\n}\n"
	r := New(Options{})
	res := runProgram(t, r, mustCompile(t, "index.ts", src), jsonEvent(t, `{}`))
	if res.Outcome != OutcomeError || res.Message != "at line three" {
		t.Fatalf("result = %v %q", res.Outcome, res.Message)
	}
	if !strings.Contains(res.Console, "index.ts:3:") {
		t.Errorf("console = %q, want a stack frame at index.ts:3", res.Console)
	}
}

func TestExternalSourceMapsAreNotRead(t *testing.T) {
	// goja's default loader would open this path and block forever reading /dev/zero.
	js := "exports.handler = () => 'ok';\n//# sourceMappingURL=/dev/zero\n"
	r := New(Options{})
	res, err := r.Run(ctxT(t), Request{Code: js, Filename: "index.js"})
	if err != nil || res.Outcome != OutcomeSuccess || string(res.Body) != "ok" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

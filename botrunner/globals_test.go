package botrunner

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// globalsBot evaluates each [name, expression] of its input in the handler's scope (so require
// is the module's), awaits the value and answers "name|JSON", as testdata/globals/gen.js does in
// Node.
const globalsBot = `
exports.handler = async (medplum, event) => {
  const out = [];
  for (const [name, expr] of event.input) {
    let v;
    try {
      v = await eval(expr);
    } catch (e) {
      v = 'THROW ' + e;
    }
    out.push(name + '|' + JSON.stringify(v));
  }
  return out;
};`

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

// TestGlobalsMatchNode runs every case of testdata/globals/cases.txt (Buffer, atob/btoa,
// structuredClone, crypto, require('crypto'), timers and queueMicrotask) in both isolation modes
// and both runtimes, and wants Node 22's answer (node22.txt).
func TestGlobalsMatchNode(t *testing.T) {
	cases, want := readLines(t, "testdata/globals/cases.txt"), readLines(t, "testdata/globals/node22.txt")
	if len(cases) != len(want) {
		t.Fatalf("%d cases, %d answers: regenerate node22.txt with gen.js", len(cases), len(want))
	}
	var input [][2]string
	for _, c := range cases {
		name, expr, _ := strings.Cut(c, "|")
		input = append(input, [2]string{name, expr})
	}
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	code := mustCompile(t, "index.js", globalsBot).JS
	for name, ex := range executors(t, Options{}) {
		for _, runtime := range []string{RuntimeAWSLambda, RuntimeVMContext} {
			t.Run(name+"/"+runtime, func(t *testing.T) {
				res := counterRun(t, ex, code, counterReq{runtime: runtime, input: string(in), key: "globals", bot: "globals"})
				if res.Outcome != OutcomeSuccess {
					t.Fatalf("run: %s %s\n%s", res.Outcome, res.Message, res.Console)
				}
				var got []string
				if err := json.Unmarshal(res.Body, &got); err != nil || len(got) != len(want) {
					t.Fatalf("body %.300s: %v", res.Body, err)
				}
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("sandbox %s\n   Node %s", got[i], want[i])
					}
				}
			})
		}
	}
}

// TestBufferSizesAreBounded: a Buffer the bot asks for in one native call (alloc, from an
// array-like of any length, concat of one big buffer many times) is at most maxBufferBytes, a
// RangeError beyond instead of an allocation that could take the process down.
func TestBufferSizesAreBounded(t *testing.T) {
	code := mustCompile(t, "index.js", `exports.handler = () => [
  () => Buffer.alloc(2 ** 40),
  () => Buffer.allocUnsafe(-1),
  () => Buffer.from({ length: 2 ** 40 }),
  () => new Buffer({ length: 2 ** 40 }),
  () => { const b = Buffer.alloc(1 << 20); return Buffer.concat(new Array(1024).fill(b)); },
  () => Buffer.concat([Buffer.from('a')], 2 ** 40),
  () => require('crypto').randomBytes(2 ** 40),
].map((f) => { try { f(); return 'no error'; } catch (e) { return e.name + ' ' + e.code; } });`).JS
	for name, ex := range executors(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			res := counterRun(t, ex, code, counterReq{key: "bounds", bot: "bounds"})
			if res.Outcome != OutcomeSuccess {
				t.Fatalf("run: %s %s", res.Outcome, res.Message)
			}
			var got []string
			if err := json.Unmarshal(res.Body, &got); err != nil {
				t.Fatal(err)
			}
			for i, g := range got {
				if g != "RangeError ERR_OUT_OF_RANGE" {
					t.Errorf("case %d: %s, want RangeError ERR_OUT_OF_RANGE", i, g)
				}
			}
		})
	}
}

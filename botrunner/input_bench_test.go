package botrunner

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/dop251/goja"
)

// benchInput is a JSON input of the bench scenarios, as a test reads it from testdata/input.
type benchInput struct {
	name, contentType, file string
	bot                     string            // the bot's source (ESM, as the scenario deploys it)
	headers                 map[string]string // event.headers
}

// benchInputs are scenario 3's $execute echo (its 322-byte JSON input, returned whole) and
// issue 24's Subscription: a rest-hook delivery of the bench's ~1.3 KB Patient, with the
// delivery's headers, to a bot that reads one field.
var benchInputs = []benchInput{
	{
		name: "Echo322", contentType: MediaJSON, file: "scenario3.json",
		bot: "export async function handler(medplum, event) {\n  return event.input;\n}\n",
	},
	{
		name: "SubscriptionPatient", contentType: MediaFHIR, file: "patient.json",
		bot: "export async function handler(medplum, event) { return event.input.id; }\n",
		headers: map[string]string{
			"content-type":           MediaFHIR,
			"x-medplum-subscription": "0d1f4b6e-2f4a-4c52-9a57-0c3f1e0c8b21",
			"x-medplum-interaction":  "update",
			"traceparent":            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		},
	},
}

func readBenchInput(tb testing.TB, file string) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/input/" + file)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// request is one run of the scenario's bot. The input is left for the run to parse
// (PrepareInput), as the gateway hands it over: the parse is part of every run.
func (in benchInput) request(tb testing.TB) Request {
	tb.Helper()
	p := mustCompile(tb, "index.js", in.bot)
	input, err := PrepareInput(in.contentType, readBenchInput(tb, in.file))
	if err != nil {
		tb.Fatal(err)
	}
	ev := Event{
		Bot:         Reference{Reference: "Bot/bench", Display: in.name},
		ContentType: in.contentType,
		Input:       input,
		Headers:     in.headers,
	}
	return Request{CacheKey: "bench-" + in.name, Code: p.JS, Filename: "index.js", Event: ev}
}

// BenchmarkWorkerInput is one run at a time of each bench input's bot, in process and in a
// worker, reporting the CPU of the process and its workers per run (cpu-ns/op).
func BenchmarkWorkerInput(b *testing.B) {
	for _, in := range benchInputs {
		for _, isolation := range []string{"inprocess", "process"} {
			b.Run(in.name+"/"+isolation, func(b *testing.B) {
				var e Executor = New(Options{})
				if isolation == "process" {
					e = newBenchPool(b, false)
				}
				benchRuns(b, e, 0, in.request(b))
			})
		}
	}
}

// BenchmarkInputToJS is what a worker does with a bench input before the bot runs: parse the
// body and build event.input as JavaScript values, in a warm instance's runtime. Unique is the
// Patient with every string but its resourceType different in each of 1,024 bodies, run in
// turn: no string value repeats from one run to the next.
func BenchmarkInputToJS(b *testing.B) {
	for _, in := range benchInputs {
		b.Run(in.name, func(b *testing.B) {
			benchInputToJS(b, in.contentType, [][]byte{readBenchInput(b, in.file)})
		})
	}
	b.Run("UniquePatient", func(b *testing.B) {
		var doc any
		if err := json.Unmarshal(readBenchInput(b, "patient.json"), &doc); err != nil {
			b.Fatal(err)
		}
		bodies := make([][]byte, 1024)
		for i := range bodies {
			body, err := json.Marshal(uniqueStrings(doc, "", i))
			if err != nil {
				b.Fatal(err)
			}
			bodies[i] = body
		}
		benchInputToJS(b, MediaFHIR, bodies)
	})
}

func benchInputToJS(b *testing.B, contentType string, bodies [][]byte) {
	x := &execution{rt: goja.New(), pooled: true} // a warm instance
	b.SetBytes(int64(len(bodies[0])))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		parsed, err := ParseInput(contentType, bodies[i%len(bodies)])
		if err != nil {
			b.Fatal(err)
		}
		_ = x.input(&parsed)
		i++
	}
}

// uniqueStrings is v with the run number n appended to every string but a resourceType.
func uniqueStrings(v any, key string, n int) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = uniqueStrings(e, k, n)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = uniqueStrings(e, key, n)
		}
		return out
	case string:
		if key == "resourceType" {
			return v
		}
		return v + "-" + strconv.Itoa(n)
	}
	return v
}

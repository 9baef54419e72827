package botrunner

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// BenchmarkRuntimeSetup measures what every run pays before bot code runs: a fresh runtime, the
// lazy globals and the event (JSON input) as JavaScript values.
func BenchmarkRuntimeSetup(b *testing.B) {
	r := New(Options{})
	req := &Request{Event: jsonEvent(b, `{"resourceType":"Patient","id":"1","name":[{"given":["A"],"family":"B"}]}`)}
	b.ReportAllocs()
	for b.Loop() {
		x := newExecution(r, nil)
		x.begin(context.Background(), req, time.Second)
		x.rt = goja.New()
		x.rt.SetMaxCallStackSize(maxCallStack)
		x.installGlobals()
		_ = x.newEvent(&req.Event)
	}
}

// benchRun runs a bot in process, in each runtime.
func benchRun(b *testing.B, filename, src string, ev Event, client MedplumClient) {
	for _, runtime := range []string{RuntimeAWSLambda, RuntimeVMContext} {
		b.Run(runtime, func(b *testing.B) { benchRunIn(b, filename, src, ev, client, runtime) })
	}
}

func benchRunIn(b *testing.B, filename, src string, ev Event, client MedplumClient, runtime string) {
	b.Helper()
	r := New(Options{})
	p := mustCompile(b, filename, src)
	req := Request{CacheKey: "bench", Code: p.JS, Filename: filename, Event: ev, Medplum: client, Runtime: runtime}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := r.Run(ctx, req)
		if err != nil || res.Outcome != OutcomeSuccess {
			b.Fatalf("%+v, %v", res, err)
		}
	}
}

// BenchmarkRunEcho is a whole run of a cached CommonJS bot that returns its FHIR JSON input.
func BenchmarkRunEcho(b *testing.B) {
	ev := Event{ContentType: MediaFHIR, Input: mustInput(b, MediaFHIR, `{"resourceType":"Patient","id":"1","name":[{"given":["A"],"family":"B"}]}`)}
	b.Run("CommonJS", func(b *testing.B) {
		benchRun(b, "index.js", `exports.handler = async (medplum, event) => event.input;`, ev, nil)
	})
	// esbuild's ESM-to-CommonJS helpers (__export, __toCommonJS) run on every load.
	b.Run("TypeScript", func(b *testing.B) {
		benchRun(b, "index.ts", `export async function handler(medplum: unknown, event: { input: unknown }) { return event.input }`, ev, nil)
	})
	b.Run("Text", func(b *testing.B) {
		benchRun(b, "index.js", `exports.handler = (medplum, event) => event.input;`,
			Event{ContentType: MediaText, Input: mustInput(b, MediaText, "hello")}, nil)
	})
	b.Run("HL7Ack", func(b *testing.B) {
		benchRun(b, "index.js", `exports.handler = (medplum, event) => event.input.buildAck();`,
			Event{ContentType: MediaHL7, Input: mustInput(b, MediaHL7, adtA01)}, nil)
	})
	b.Run("CoreAndConsole", func(b *testing.B) {
		benchRun(b, "index.ts", `import { createReference } from '@medplum/core';
export async function handler(medplum: unknown, event: any) { console.log('input', event.input.id); return createReference(event.input) }`, ev, nil)
	})
}

// memClient answers every FHIR request from memory, to measure the binding without HTTP.
type memClient struct{}

func (memClient) Do(_ context.Context, method, path string, _ url.Values, body []byte, _ string, _ http.Header) (int, string, []byte, error) {
	if method == http.MethodPost {
		return 201, "application/fhir+json", body, nil
	}
	return 200, "application/fhir+json", []byte(`{"resourceType":"Patient","id":"` + strings.TrimPrefix(path, "Patient/") + `"}`), nil
}

// BenchmarkRunMedplumCalls is a bot that reads a patient and creates an observation.
func BenchmarkRunMedplumCalls(b *testing.B) {
	benchRun(b, "index.ts", `import { createReference } from '@medplum/core';
export async function handler(medplum: any) {
  const p = await medplum.readResource('Patient', '1');
  return medplum.createResource({ resourceType: 'Observation', status: 'final', subject: createReference(p) });
}`, jsonEvent(b, `{}`), memClient{})
}

func BenchmarkParseInput(b *testing.B) {
	bundle := `{"resourceType":"Bundle","type":"collection","entry":[` +
		strings.Repeat(`{"resource":{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"valueQuantity":{"value":72,"unit":"/min"}}},`, 99) +
		`{"resource":{"resourceType":"Patient","id":"1"}}]}`
	tests := []struct {
		name, contentType, body string
	}{
		{"Text", MediaText, "hello world"},
		{"JSON", MediaJSON, `{"a":1,"b":[true,null,"x"],"c":{"d":2.5}}`},
		{"FHIR", MediaFHIR, `{"resourceType":"Patient","id":"1","name":[{"given":["A"],"family":"B"}],"birthDate":"2000-01-01"}`},
		{"FHIRBundle100", MediaFHIR, bundle},
		{"FHIRPatient", MediaFHIR, string(readBenchInput(b, "patient.json"))}, // issue 24's
		{"Form", MediaForm, "a=1&b=two+words&c=%C3%A9"},
		{"HL7", MediaHL7, adtA01},
	}
	for _, tc := range tests {
		b.Run(tc.name, func(b *testing.B) {
			body := []byte(tc.body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseInput(tc.contentType, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCompileTS(b *testing.B) {
	src := `import { createReference, getReferenceString } from '@medplum/core';
import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Observation, Patient } from '@medplum/fhirtypes';

interface Input { patientId: string; value: number }
enum Unit { PerMinute = '/min' }

export async function handler(medplum: MedplumClient, event: BotEvent<Input>): Promise<Observation> {
  const patient = await medplum.readResource('Patient', event.input.patientId) as Patient;
  console.log('creating for', getReferenceString(patient));
  return medplum.createResource<Observation>({
    resourceType: 'Observation',
    status: 'final',
    code: { text: 'Heart rate' },
    subject: createReference(patient),
    valueQuantity: { value: event.input.value, unit: Unit.PerMinute },
  });
}
`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile("index.ts", src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeJSONInput compares the runner's JSON-to-JavaScript conversion with JSON.parse.
func BenchmarkDecodeJSONInput(b *testing.B) {
	in := mustInput(b, MediaFHIR, `{"resourceType":"Bundle","type":"collection","entry":[`+
		strings.Repeat(`{"resource":{"resourceType":"Observation","status":"final","valueQuantity":{"value":72.5,"unit":"/min"}}},`, 49)+
		`{"resource":{"resourceType":"Patient","id":"1"}}]}`)
	b.Run("jsonValue", func(b *testing.B) {
		x := &execution{rt: goja.New()}
		b.SetBytes(int64(len(in.JSON)))
		for b.Loop() {
			_ = x.jsonValue(in.JSON)
		}
	})
	b.Run("JSON.parse", func(b *testing.B) {
		rt := goja.New()
		parse, _ := goja.AssertFunction(rt.Get("JSON").ToObject(rt).Get("parse"))
		s := rt.ToValue(string(in.JSON))
		b.SetBytes(int64(len(in.JSON)))
		for b.Loop() {
			if _, err := parse(goja.Undefined(), s); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package hl7js

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dop251/goja"

	"github.com/fhirgate/fhirgate/internal/hl7"
)

// BenchmarkInstall measures Install alone on a fresh runtime (the runtime
// is created with the timer stopped): the cost every bot run pays.
func BenchmarkInstall(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		rt := goja.New()
		b.StartTimer()
		if err := Install(rt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInstallAndLoad adds the first use of a class: the cost a bot
// that uses HL7 pays once per run on top of Install.
func BenchmarkInstallAndLoad(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		rt := goja.New()
		b.StartTimer()
		if err := Install(rt); err != nil {
			b.Fatal(err)
		}
		if _, err := rt.RunString(`Hl7Message`); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBotRun is a typical HL7 bot run minus runtime creation: Install,
// Wrap the input, read PID-5 and MSH-9, build an ACK, Unwrap the result.
func BenchmarkBotRun(b *testing.B) {
	m, err := hl7.Parse(adt)
	if err != nil {
		b.Fatal(err)
	}
	prg := goja.MustCompile("bot.js", `(function (input) {
		const name = input.getSegment('PID').getField(5).getComponent(1);
		const type = input.header.getField(9).getComponent(2);
		if (!name || !type) throw new Error('bad input');
		return input.buildAck({ ackCode: 'AA' });
	})`, true)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		rt := goja.New()
		b.StartTimer()
		if err := Install(rt); err != nil {
			b.Fatal(err)
		}
		fv, err := rt.RunProgram(prg)
		if err != nil {
			b.Fatal(err)
		}
		fn, _ := goja.AssertFunction(fv)
		res, err := fn(goja.Undefined(), Wrap(rt, m))
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := Unwrap(rt, res); !ok {
			b.Fatal("result is not a message")
		}
	}
}

// BenchmarkJSParseReadAllSerialize is the @medplum/core comparison
// (~16 MB/s on Node 20) run by bot code under goja: Hl7Message.parse, read
// every component of every repetition of every field through the
// fields/components arrays and getComponent, toString, over
// internal/hl7/testdata.
func BenchmarkJSParseReadAllSerialize(b *testing.B) {
	benchmarkJSCorpus(b, `(function (texts) {
		let n = 0;
		for (const text of texts) {
			const msg = Hl7Message.parse(text);
			for (const seg of msg.segments) {
				const fields = seg.fields;
				for (let i = 0; i < fields.length; i++) {
					const comps = fields[i].components;
					for (let r = 0; r < comps.length; r++) {
						for (let c = 1; c <= comps[r].length; c++) {
							n += fields[i].getComponent(c, undefined, r).length;
						}
					}
				}
			}
			n += msg.toString().length;
		}
		return n;
	})`)
}

// BenchmarkJSParseGetFieldSerialize reads the way bots usually do:
// getSegment/getField/getComponent, here the first component of every field
// of every segment, then toString.
func BenchmarkJSParseGetFieldSerialize(b *testing.B) {
	benchmarkJSCorpus(b, `(function (texts) {
		let n = 0;
		for (const text of texts) {
			const msg = Hl7Message.parse(text);
			for (let s = 0; ; s++) {
				const seg = msg.getSegment(s);
				if (seg === undefined) break;
				for (let i = 1; ; i++) {
					const f = seg.getField(i);
					if (f === undefined) break;
					n += f.getComponent(1).length;
				}
			}
			n += msg.toString().length;
		}
		return n;
	})`)
}

// benchmarkJSCorpus runs fn(texts) over internal/hl7/testdata in one loaded
// runtime.
func benchmarkJSCorpus(b *testing.B, fn string) {
	files, err := filepath.Glob(filepath.Join("..", "hl7", "testdata", "*.hl7"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no corpus: %v", err)
	}
	var texts []any
	var size int64
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		texts = append(texts, string(data))
		size += int64(len(data))
	}
	rt := goja.New()
	if err := Install(rt); err != nil {
		b.Fatal(err)
	}
	fv, err := rt.RunString(fn)
	if err != nil {
		b.Fatal(err)
	}
	call, _ := goja.AssertFunction(fv)
	arg := rt.NewArray(texts...)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := call(goja.Undefined(), arg); err != nil {
			b.Fatal(err)
		}
	}
}

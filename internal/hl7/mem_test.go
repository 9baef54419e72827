package hl7

import (
	"runtime"
	"strings"
	"testing"
)

// memShape is an input whose parse cost in memory is bounded.
type memShape struct {
	name string
	text func(t testing.TB) string
}

// memShapes are the message shapes of issue 23 ("parsed input ≤ 4× the
// body"): segments of two bytes, a segment of a million empty fields, and
// realistic ADT and ORU segments, each about 1 MiB, with the line breaks
// HL7 prescribes (CR) and with LF and CRLF, which Parse joins into a copy.
func memShapes() []memShape {
	const mib = 1 << 20
	tiny := func(sep string) func(testing.TB) string {
		return func(testing.TB) string {
			return `MSH|^~\&|A` + strings.Repeat(sep+"Z", 524_000)
		}
	}
	realistic := func(sep string) func(testing.TB) string {
		return func(t testing.TB) string {
			// One ADT^A01 header, then the segments of an ADT^A01 and a large
			// ORU^R01 (OBX, NTE, …) repeated to 1 MiB.
			adt := strings.Split(readSample(t, "adt_a01.hl7"), "\r")
			oru := strings.Split(readSample(t, "oru_r01_large.hl7"), "\r")
			var b strings.Builder
			b.WriteString(adt[0])
			for b.Len() < mib {
				for _, s := range append(adt[1:], oru[1:]...) {
					if s != "" {
						b.WriteString(sep)
						b.WriteString(s)
					}
				}
			}
			return b.String()
		}
	}
	return []memShape{
		{"tiny segments", tiny("\r")},
		{"tiny segments LF", tiny("\n")},
		{"tiny segments CRLF", tiny("\r\n")},
		{"tiny fields", func(testing.TB) string {
			return `MSH|^~\&|A` + "\rPID" + strings.Repeat("|", 1_000_000)
		}},
		{"ADT and ORU", realistic("\r")},
		{"ADT and ORU LF", realistic("\n")},
	}
}

// parseMemory returns the bytes Parse allocates for text (all of them, also
// those it drops before returning) and the bytes its result keeps reachable
// after a collection.
func parseMemory(t testing.TB, text string) (allocated, retained uint64) {
	t.Helper()
	var before, after, kept runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, err := Parse(text)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&kept)
	if m.NumSegments() == 0 {
		t.Fatal("no segments")
	}
	runtime.KeepAlive(m)
	runtime.KeepAlive(text)
	allocated = after.TotalAlloc - before.TotalAlloc
	if kept.HeapAlloc > before.HeapAlloc {
		retained = kept.HeapAlloc - before.HeapAlloc
	}
	return allocated, retained
}

// TestParseMemoryBound checks issue 23's bound: parsing costs at most 4×
// the input, counting everything Parse allocates (so a slice that grows by
// doubling counts twice) and, separately, what the parsed message keeps.
// Memory use is deterministic; the slack covers the runtime's own small
// allocations between the two readings.
func TestParseMemoryBound(t *testing.T) {
	const slack = 64 << 10
	for _, shape := range memShapes() {
		text := shape.text(t)
		allocated, retained := parseMemory(t, text)
		limit := 4*uint64(len(text)) + slack
		t.Logf("%s: %d bytes: allocated %.2f×, retained %.2f×", shape.name, len(text),
			float64(allocated)/float64(len(text)), float64(retained)/float64(len(text)))
		if allocated > limit {
			t.Errorf("%s: Parse allocated %d bytes for %d bytes of input (%.1f×), want ≤ 4×",
				shape.name, allocated, len(text), float64(allocated)/float64(len(text)))
		}
		if retained > limit {
			t.Errorf("%s: the parsed message keeps %d bytes for %d bytes of input (%.1f×), want ≤ 4×",
				shape.name, retained, len(text), float64(retained)/float64(len(text)))
		}
	}
}

// BenchmarkParseMemory reports, for each shape, the bytes Parse allocates
// per byte of input (alloc-B/B) and its speed.
func BenchmarkParseMemory(b *testing.B) {
	for _, shape := range memShapes() {
		text := shape.text(b)
		b.Run(strings.ReplaceAll(shape.name, " ", "_"), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			n := 0
			for b.Loop() {
				if _, err := Parse(text); err != nil {
					b.Fatal(err)
				}
				n++
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(n)/float64(len(text)), "alloc-B/B")
		})
	}
}

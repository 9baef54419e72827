package botrunner

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// parseAllocs is how many bytes ParseInput allocates for body.
func parseAllocs(t *testing.T, contentType, body string) uint64 {
	t.Helper()
	b := []byte(body)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	in, err := ParseInput(contentType, b)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("ParseInput(%s): %v", contentType, err)
	}
	runtime.KeepAlive(in)
	return after.TotalAlloc - before.TotalAlloc
}

// TestParsedInputIsAtMostFourTimesTheBody: what parsing a body allocates — in the bot worker,
// or in the gateway under bot_isolation inprocess once the run holds its slot — stays within
// four times the body for the shapes that cost a parser the most per byte. (What the bot's
// engine then builds from it is the bot's memory, bounded by bot_memory.)
func TestParsedInputIsAtMostFourTimesTheBody(t *testing.T) {
	const mib = 1 << 20
	var form strings.Builder
	// Go refuses more than 10,000 form fields, so a 1 MiB form of many fields has long ones.
	for i := 0; form.Len() < mib-120; i++ {
		fmt.Fprintf(&form, "field%05d=%s&", i, strings.Repeat("v", 110))
	}
	for _, tc := range []struct {
		name, contentType, body string
	}{
		{"JSON of tiny objects", MediaJSON, "[" + strings.Repeat("{},", mib/3) + "{}]"},
		{"JSON of tiny arrays, nested", MediaJSON, strings.Repeat(`{"a":[[],[],[],{"b":1}],"c":`, 100) + "1" + strings.Repeat("}", 100)},
		{"FHIR of many members", MediaFHIR, `{"resourceType":"Patient",` + strings.Repeat(`"a":1,`, mib/6) + `"z":1}`},
		{"form of many fields", MediaForm, strings.TrimSuffix(form.String(), "&")},
		{"text", MediaText, strings.Repeat("x", mib)},
		{"HL7 of tiny segments", MediaHL7, `MSH|^~\&|A` + strings.Repeat("\rZ", mib/2)},
		{"HL7 of tiny segments, LF", MediaHL7, `MSH|^~\&|A` + strings.Repeat("\nZ", mib/2)},
		{"HL7 of tiny fields", MediaHL7, `MSH|^~\&|A` + "\rPID" + strings.Repeat("|", mib)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseAllocs(t, tc.contentType, tc.body)
			ratio := float64(got) / float64(len(tc.body))
			t.Logf("%d bytes of body: %d allocated (%.2f×)", len(tc.body), got, ratio)
			if ratio > 4 {
				t.Errorf("parsing %d bytes allocated %d, %.1f× the body; the bound is 4×", len(tc.body), got, ratio)
			}
		})
	}
}

// parseSlack is what parsing may allocate beyond 4× the body: the fixed cost of a parse (a
// map, an error, a message header), which dominates for the small bodies a fuzzer makes.
const parseSlack = 64 << 10

// formFieldCost bounds what a form field costs beyond its bytes: its entries in the maps
// url.ParseQuery and the parsed form hold. Go refuses forms of more than 10,000 fields, so
// this adds at most ~0.8 MiB, whatever the body; a 1 MiB form of many fields stays within 4×
// (TestParsedInputIsAtMostFourTimesTheBody), a small form of tiny fields is the case this
// covers ("a=1&" × 9,000: 36 KB of body, 0.7 MB parsed).
const formFieldCost = 80

// FuzzParseInputMemory: whatever the body and Content-Type, parsing allocates at most four
// times the body (plus a fixed slack), accepted or refused. The seeds include the shapes that
// cost the most per byte, at sizes where the ratio, not the slack, decides.
func FuzzParseInputMemory(f *testing.F) {
	f.Add(MediaHL7, []byte(`MSH|^~\&|A`+strings.Repeat("\rZ", 40_000)))
	f.Add(MediaHL7, []byte(`MSH|^~\&|A`+"\rPID"+strings.Repeat("|", 80_000)))
	f.Add(MediaHL7, []byte(`MSH|^~\&|A`+"\rPID|"+strings.Repeat("^~&", 30_000)))
	f.Add(MediaJSON, []byte("["+strings.Repeat("{},", 30_000)+"{}]"))
	f.Add(MediaFHIR, []byte(`{"resourceType":"Patient",`+strings.Repeat(`"a":[],`, 20_000)+`"z":1}`))
	f.Add(MediaForm, []byte(strings.Repeat("a=1&", 9_000)+"b=2"))
	f.Add(MediaForm, []byte(strings.Repeat("a=1&", 20_000)))
	f.Add(MediaText, []byte(strings.Repeat("é", 50_000)))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		in, _ := ParseInput(contentType, body)
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(in)
		bound := 4*uint64(len(body)) + parseSlack
		if kind, err := PrepareInput(contentType, nil); err == nil && kind.Kind == InputForm {
			fields := min(bytes.Count(body, []byte("&"))+1, 10_000)
			bound += formFieldCost * uint64(fields)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > bound {
			t.Fatalf("parsing %d bytes of %q allocated %d, over the bound of %d", len(body), contentType, got, bound)
		}
	})
}

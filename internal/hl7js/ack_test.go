package hl7js

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dop251/goja"

	"github.com/fhirgate/fhirgate/internal/hl7"
)

// ackMessages are messages whose ACKs Go and hl7.js must build alike: internal/hl7/testdata and
// the shapes of MSH that buildAck reads differently (MSH-9 variants, missing fields, escapes,
// other delimiters, a truncation character, fewer encoding characters).
func ackMessages(t *testing.T) map[string]string {
	t.Helper()
	msgs := map[string]string{
		"no MSH-12":              "MSH|^~\\&|A",
		"MSH-9 one component":    "MSH|^~\\&|A|B|C|D|2024||ADT|1|P|2.3",
		"MSH-9 trigger":          "MSH|^~\\&|A|B|C|D|2024||ADT^A04|1|P|2.3",
		"MSH-9 structure":        "MSH|^~\\&|A|B|C|D|2024||ORU^R01^ORU_R01|1|P|2.5.1",
		"MSH-9 empty trigger":    "MSH|^~\\&|A|B|C|D|2024||ADT^^ADT_A01|1|P|2.5.1",
		"MSH-9 repetitions":      "MSH|^~\\&|A|B|C|D|2024||ADT^A01~ORU^R01|1|P|2.5.1",
		"escapes and components": "MSH|^~\\&|A\\F\\B^X&Y|FAC~2|C\\S\\D|D\\E\\|2024||ADT^A01|CTRL\\T\\1|P|2.5.1\rPID|1",
		"empty MSH-10":           "MSH|^~\\&|A|B|C|D|2024||ADT^A01||P|2.5.1",
		"other delimiters":       "MSH#$%*@#A$1#B#C#D#2024##ADT$A01$ADT_A01#7#P#2.4\rPID#1",
		"truncation character":   "MSH|^~\\&#|A|B|C|D|2024||ADT^A01|1|P|2.7",
		"two encoding chars":     "MSH|^~|A|B|C|D|2024||ADT^A01|1|P|2.3",
	}
	files, err := filepath.Glob(filepath.Join("..", "hl7", "testdata", "*.hl7"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata messages: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		msgs[filepath.Base(f)] = string(b)
	}
	return msgs
}

// ackRuntime is a runtime with the HL7 globals, a Date fixed at one instant (so both ACKs of a
// message carry the same MSH-7) and helpers: mask(ack) is ack's text with MSH-10, the random
// control id, blanked; both(text, code) builds the ACK of text twice, once from the message as
// parsed and once after its segments array was built (which makes hl7.js read it field by
// field), and returns what a bot can see of each.
func ackRuntime(t *testing.T) *goja.Runtime {
	t.Helper()
	rt := goja.New()
	if err := Install(rt); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.RunString(`
		const RealDate = Date;
		globalThis.Date = class extends RealDate {
			constructor(...a) { super(...(a.length ? a : [1767225600123])); }
		};
		function mask(ack) {
			const fs = ack.segments[0].context.fieldSeparator;
			const lines = ack.toString().split('\r');
			const msh = lines[0].split(fs);
			msh[9] = '<id>';
			lines[0] = msh.join(fs);
			return lines.join('\r');
		}
		function view(m, ack) {
			return {
				text: mask(ack),
				json: JSON.stringify(ack, (k, v) => (k === 'components' && v[0][0].length === 20 ? '<id>' : v)),
				context: [ack.context.fieldSeparator, ack.context.getMsh2(), ack.context === m.context],
				segments: ack.segments.map((s) => [s.name, s.context === m.context, s.fields.length]),
				header: [3, 4, 5, 6, 9, 11, 12].map((i) => ack.header.getField(i)?.toString()),
				msa: ack.getSegment('MSA').getField(2).toString(),
				instance: ack instanceof Hl7Message,
			};
		}
		function both(text, code) {
			const a = Hl7Message.parse(text);
			const b = Hl7Message.parse(text);
			void b.segments;
			return [JSON.stringify(view(a, a.buildAck({ ackCode: code }))), JSON.stringify(view(b, b.buildAck({ ackCode: code })))];
		}
	`); err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestBuildAckFromGoMatchesFields checks that the ACK Go builds for a message as parsed is the
// one hl7.js builds field by field, for every code and message shape.
func TestBuildAckFromGoMatchesFields(t *testing.T) {
	rt := ackRuntime(t)
	both, ok := goja.AssertFunction(rt.Get("both"))
	if !ok {
		t.Fatal("both is not a function")
	}
	for name, text := range ackMessages(t) {
		if _, err := hl7.Parse(text); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, code := range []string{"AA", "AE", "AR", "CA", "CE", "CR"} {
			v, err := both(goja.Undefined(), rt.ToValue(text), rt.ToValue(code))
			if err != nil {
				t.Fatalf("%s %s: %v", name, code, err)
			}
			var got [2]string
			if err := rt.ExportTo(v, &got); err != nil {
				t.Fatal(err)
			}
			if got[0] != got[1] {
				t.Errorf("%s %s: ACK of the parsed message\n%s\nfield by field\n%s", name, code, got[0], got[1])
			}
		}
	}
}

// TestBuildAckOfParsedMessageIsGoBacked checks that the ACK of a message as parsed is answered
// from the Go message behind it, without serialising and parsing it again: Unwrap returns the
// same *hl7.Message each time. An ACK built field by field is parsed anew by every Unwrap.
func TestBuildAckOfParsedMessageIsGoBacked(t *testing.T) {
	rt := newRuntime(t)
	unwrap := func(js string) (*hl7.Message, *hl7.Message) {
		t.Helper()
		v, err := rt.RunString(js)
		if err != nil {
			t.Fatal(err)
		}
		m1, ok1 := Unwrap(rt, v)
		m2, ok2 := Unwrap(rt, v)
		if !ok1 || !ok2 {
			t.Fatalf("%s: not an Hl7Message", js)
		}
		return m1, m2
	}
	if m1, m2 := unwrap(`input.buildAck()`); m1 != m2 {
		t.Error("the ACK of the parsed input was parsed again by Unwrap")
	}
	if m1, m2 := unwrap(`void msg.segments; msg.buildAck()`); m1 == m2 {
		t.Error("the ACK of a message whose segments were built was not built field by field")
	}
}

// TestBuildAckHonoursBotMethods checks that buildAck of a message as parsed still reads the
// message through the methods, accessors and context a bot replaced or added, as Medplum's
// buildAck does.
func TestBuildAckHonoursBotMethods(t *testing.T) {
	const (
		msh3 = `a.header.getField(3).toString()` // the original MSH-5 as buildAck read it
		msh2 = `a.toString().split('|')[1]`
		msh9 = `a.toString().split('|')[8]`
	)
	tests := []struct {
		name  string
		setup string // run before buildAck on a fresh message m
		read  string // what to read of the ACK a
		want  string
	}{
		{"as parsed", ``, msh3 + ` + ' ' + ` + msh9, `"RECVAPP ACK^A01^ACK"`},
		{"field toString replaced", `Hl7Field.prototype.toString = function () { return 'X'; };`, `a.toString().split('|')[2]`, `"X"`},
		{"segment getField replaced", `const g = Hl7Segment.prototype.getField; Hl7Segment.prototype.getField = function (i) { return i === 5 ? Hl7Field.parse('Y') : g.call(this, i); };`, msh3, `"Y"`},
		{"getSegment replaced", `const g = Hl7Message.prototype.getSegment; Hl7Message.prototype.getSegment = function (n) { return n === 'MSH' ? Hl7Segment.parse('MSH|^~\\&|A|B|SEG5') : g.call(this, n); };`, msh3, `"SEG5"`},
		{"context of the cached MSH replaced", `m.getSegment('MSH').context = new Hl7Context('\r', '#');`, msh3, `""`},
		{"getField of the cached MSH replaced", `m.getSegment('MSH').getField = () => Hl7Field.parse('Z');`, msh3, `"Z"`},
		{"a cached field with its own toString", `m.getSegment('MSH').getField(5).toString = () => 'W';`, msh3, `"W"`},
		{"context replaced", `m.context = new Hl7Context(); m.context.getMsh2 = () => 'Q~\\&';`, msh2, `"Q~\\&"`},
		{"context changed", `m.context.componentSeparator = '$';`, msh2, `"$~\\&"`},
		{"getMsh2 replaced", `Hl7Context.prototype.getMsh2 = function () { return 'P~\\&'; };`, msh2, `"P~\\&"`},
		{"components accessor replaced", `Object.defineProperty(Hl7Field.prototype, 'components', { get() { return [['V', 'T1', 'S1']]; }, configurable: true });`, msh9, `"ACK^T1^ACK"`},
		{"segments built", `m.segments[0].fields[4] = Hl7Field.parse('NEW');`, msh3, `"NEW"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRuntime(t)
			got := evalJS(t, rt, `const m = Hl7Message.parse(text); `+tc.setup+` const a = m.buildAck(); return `+tc.read+`;`)
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

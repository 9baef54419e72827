package hl7js

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dop251/goja"

	"github.com/fhirgate/fhirgate/internal/hl7"
)

// adt is an ADT^A01 with LF line breaks and a trailing newline, escapes,
// repetitions and subcomponents.
const adt = "MSH|^~\\&|SENDAPP|SENDFAC|RECVAPP|RECVFAC|20240312081530||ADT^A01^ADT_A01|CTRL42|P|2.5.1\n" +
	"EVN|A01|20240312081500\n" +
	"PID|1||MRN1^^^HOSP&1.2.3&ISO^MR~SSN9^^^USSSA^SS||DOE^JOHN^Q~ROE^JOHNNY||19800101|M\n" +
	"OBX|1|ST|NOTE^Note||Smith \\T\\ Sons\\F\\Ltd||||||F\n" +
	"OBX|2|NM|WT^Weight||72|kg\n"

// adtCR is adt as Hl7Message.toString() renders it.
var adtCR = strings.TrimSuffix(strings.ReplaceAll(adt, "\n", "\r"), "\r")

// newRuntime returns a runtime with the globals installed, `text` holding
// adt, `msg` = Hl7Message.parse(text) and `input` = Wrap(adt).
func newRuntime(t testing.TB) *goja.Runtime {
	t.Helper()
	rt := goja.New()
	if err := Install(rt); err != nil {
		t.Fatal(err)
	}
	m, err := hl7.Parse(adt)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Set("input", Wrap(rt, m)); err != nil {
		t.Fatal(err)
	}
	if err := rt.Set("text", adt); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.RunString(`var msg = Hl7Message.parse(text);`); err != nil {
		t.Fatal(err)
	}
	return rt
}

// evalJS runs a function body in rt and returns its result as JSON, or
// "undefined", or "throws <Name>: <message>".
func evalJS(t testing.TB, rt *goja.Runtime, body string) string {
	t.Helper()
	v, err := rt.RunString(`(function () {
		try {
			const r = (function () {` + body + `})();
			return r === undefined ? 'undefined' : JSON.stringify(r);
		} catch (e) {
			return 'throws ' + e.name + ': ' + e.message;
		}
	})()`)
	if err != nil {
		t.Fatalf("running %q: %v", body, err)
	}
	return v.String()
}

func TestHl7MessageAPI(t *testing.T) {
	tests := []struct {
		name string
		js   string // a function body
		want string // JSON of the result, "undefined" or a "throws" prefix
	}{
		// Parsing and structure.
		{"segments are an array without a trailing empty segment", `return [Array.isArray(msg.segments), msg.segments.length]`, `[true,5]`},
		{"segment names", `return msg.segments.map(s => s.name)`, `["MSH","EVN","PID","OBX","OBX"]`},
		{"header is the first segment", `return msg.header === msg.segments[0] && msg.header.name`, `"MSH"`},
		{"context", `return [msg.context.segmentSeparator, msg.context.getMsh1(), msg.context.getMsh2()]`, `["\r","|","^~\\&"]`},
		{"default context", `const c = new Hl7Context(); return [c.fieldSeparator, c.componentSeparator, c.repetitionSeparator, c.escapeCharacter, c.subcomponentSeparator, c.getMsh2()]`, `["|","^","~","\\","&","^~\\&"]`},
		{"wrapped input is an Hl7Message", `return [input instanceof Hl7Message, input.segments.length, input.toString() === msg.toString()]`, `[true,5,true]`},
		{"toString joins with CR", `return msg.toString()`, jsonString(adtCR)},
		{"toString round trip", `return Hl7Message.parse(msg.toString()).toString() === msg.toString()`, `true`},
		{"for-of and spread", `const names = []; for (const s of msg.segments) names.push(s.name); return [...msg.segments].length === names.length`, `true`},
		{"UTF-8", `const m = Hl7Message.parse('MSH|^~\\&|cobas®\rPID|1||X||Müller^Zoë 🙂 患者'); return [m.getSegment('PID').getComponent(5, 2), m.header.getField(3).toString(), m.toString().length]`, `["Zoë 🙂 患者","cobas®",42]`},
		{"hex escape to UTF-8", `return Hl7Field.parse('caf\\Xc3a9\\').getComponent(1)`, `"café"`},
		{"JSON shape", `return JSON.parse(JSON.stringify(Hl7Message.parse('MSH|^~\\&|A'))).segments[0].fields[2].components`, `[["A"]]`},

		// getSegment, getAllSegments and the deprecated aliases.
		{"getSegment by name", `return msg.getSegment('PID').getField(3).getComponent(1)`, `"MRN1"`},
		{"getSegment by index", `return msg.getSegment(2).name`, `"PID"`},
		{"getSegment missing name", `return msg.getSegment('ZZZ')`, `undefined`},
		{"getSegment index out of range", `return msg.getSegment(99)`, `undefined`},
		{"getSegment returns the first", `return msg.getSegment('OBX').getField(1).toString()`, `"1"`},
		{"getAllSegments", `return msg.getAllSegments('OBX').map(s => s.getField(5).toString())`, `["Smith \\T\\ Sons\\F\\Ltd","72"]`},
		{"getAllSegments missing", `return msg.getAllSegments('ZZZ')`, `[]`},
		{"deprecated get", `return [msg.get('PID').name, msg.get(1).name]`, `["PID","EVN"]`},
		{"deprecated getAll", `return msg.getAll('OBX').length`, `2`},

		// Fields with Medplum's MSH offsets.
		{"MSH-0 is the name", `return msg.header.getField(0).toString()`, `"MSH"`},
		{"MSH-1 is the field separator", `return msg.header.getField(1).toString()`, `"|"`},
		{"MSH-2 is the encoding characters", `return [msg.header.getField(2).toString(), msg.header.getField(2).getComponent(1)]`, `["^~\\&","^~\\&"]`},
		{"MSH-3", `return msg.header.getField(3).toString()`, `"SENDAPP"`},
		{"MSH-9 components", `const f = msg.header.getField(9); return [f.getComponent(1), f.getComponent(2), f.getComponent(3)]`, `["ADT","A01","ADT_A01"]`},
		{"MSH-10 and MSH-12", `return [msg.header.getField(10).toString(), msg.header.getField(12).toString()]`, `["CTRL42","2.5.1"]`},
		{"field out of range is undefined", `return msg.header.getField(13)`, `undefined`},
		{"deprecated segment get has no MSH offset", `return [msg.header.get(1).toString(), msg.header.get(2).toString()]`, `["^~\\&","SENDAPP"]`},
		{"PID-1", `return msg.getSegment('PID').getField(1).toString()`, `"1"`},
		{"fields array", `const s = msg.getSegment('PID'); return [s.fields.length, s.fields[0].toString(), s.fields[5].components]`, `[9,"PID",[["DOE","JOHN","Q"],["ROE","JOHNNY"]]]`},

		// Components: component 1-based, subcomponent 0-based, repetition 0-based.
		{"component", `return msg.getSegment('PID').getField(5).getComponent(2)`, `"JOHN"`},
		{"component of a repetition", `return msg.getSegment('PID').getField(5).getComponent(2, undefined, 1)`, `"JOHNNY"`},
		{"whole component keeps subcomponents", `return msg.getSegment('PID').getField(3).getComponent(4)`, `"HOSP&1.2.3&ISO"`},
		{"subcomponent is 0-based", `const f = msg.getSegment('PID').getField(3); return [f.getComponent(4, 0), f.getComponent(4, 1), f.getComponent(4, 2), f.getComponent(4, 3)]`, `["HOSP","1.2.3","ISO",""]`},
		{"missing component is empty", `return msg.getSegment('PID').getField(5).getComponent(9)`, `""`},
		{"missing repetition throws like Medplum", `return msg.getSegment('PID').getField(5).getComponent(1, undefined, 5)`, `throws TypeError`},
		{"segment getComponent", `return msg.getSegment('PID').getComponent(3, 1, undefined, 1)`, `"SSN9"`},
		{"segment getComponent subcomponent", `return msg.getSegment('PID').getComponent(3, 4, 2)`, `"ISO"`},
		{"segment getComponent missing field", `return msg.getSegment('PID').getComponent(99, 1)`, `""`},
		{"deprecated field get is 0-based", `return msg.getSegment('PID').getField(5).get(0)`, `"DOE"`},
		{"getComponent decodes escapes", `return msg.getAllSegments('OBX')[0].getField(5).getComponent(1)`, `"Smith & Sons|Ltd"`},
		{"toString keeps escapes", `return msg.getAllSegments('OBX')[0].getField(5).toString()`, `"Smith \\T\\ Sons\\F\\Ltd"`},

		// Static parse functions and constructors.
		{"custom delimiters", `const m = Hl7Message.parse('MSH#^~\\&#A\rPID#1##X^Y~Z'); return [m.context.fieldSeparator, m.getSegment('PID').getField(3).getComponent(2), m.getSegment('PID').getField(3).getComponent(1, undefined, 1), m.header.getField(1).toString()]`, `["#","Y","Z","#"]`},
		{"LF CRLF blank lines and MLLP", `return Hl7Message.parse('\x0bMSH|^~\\&|A\r\n\r\nPID|1\n\x1c\r').toString()`, `"MSH|^~\\&|A\rPID|1"`},
		{"parse error", `try { Hl7Message.parse('PID|1'); } catch (e) { return [e instanceof Error, e.type, e.message.startsWith('Invalid HL7 message: line 1, offset 0: ')]; }`, `[true,"entity.parse.failed",true]`},
		{"parse error for truncated MSH", `Hl7Message.parse('MSH|')`, `throws Error: Invalid HL7 message: line 1, offset 4: missing encoding characters (MSH-2)`},
		{"Hl7Segment.parse", `const s = Hl7Segment.parse('PID|1||X^Y'); return [s.name, s.getField(3).getComponent(2), s.toString(), s.fields.length]`, `["PID","Y","PID|1||X^Y",4]`},
		{"Hl7Segment.parse with context", `const s = Hl7Segment.parse('PID#1##X:Y', new Hl7Context('\r', '#', ':')); return s.getField(3).getComponent(2)`, `"Y"`},
		{"Hl7Field.parse", `const f = Hl7Field.parse('A^B~C'); return [f.components, f.toString(), f.getComponent(1, undefined, 1)]`, `[[["A","B"],["C"]],"A^B~C","C"]`},
		{"Hl7Segment constructor from strings", `const s = new Hl7Segment(['ZZZ', 'a', 'b^c']); return [s.name, s.toString(), s.getField(2).getComponent(2)]`, `["ZZZ","ZZZ|a|b^c","c"]`},
		{"Hl7Segment constructor from fields", `const s = new Hl7Segment([new Hl7Field([['NTE']]), new Hl7Field([['1']])]); return s.toString()`, `"NTE|1"`},
		{"Hl7Field constructor", `return new Hl7Field([['a', 'b'], ['c']]).toString()`, `"a^b~c"`},
		{"Hl7Message constructor", `const m = new Hl7Message([Hl7Segment.parse('MSH|^~\\&|X'), Hl7Segment.parse('PID|1')]); return [m.toString(), m.header.getField(3).toString(), m.getSegment('PID').name]`, `["MSH|^~\\&|X\rPID|1","X","PID"]`},

		// Setters.
		{"setField", `const s = msg.getSegment('PID'); return [s.setField(8, 'F'), s.getField(8).toString(), msg.toString().includes('|19800101|F')]`, `[true,"F",true]`},
		{"setField pads", `const s = msg.getSegment('EVN'); s.setField(5, 'X'); return s.toString()`, `"EVN|A01|20240312081500|||X"`},
		{"setField takes wire text", `const s = msg.getSegment('EVN'); s.setField(3, 'A^B'); return s.getField(3).getComponent(2)`, `"B"`},
		{"setField with a field", `const s = msg.getSegment('EVN'); s.setField(1, new Hl7Field([['A04']])); return msg.toString().split('\r')[1]`, `"EVN|A04|20240312081500"`},
		{"setField MSH-1 and MSH-2 refused", `return [msg.header.setField(1, '#'), msg.header.setField(2, '^~')]`, `[false,false]`},
		{"setField MSH offset", `msg.header.setField(3, 'NEWAPP'); return [msg.header.getField(3).toString(), msg.toString().startsWith('MSH|^~\\&|NEWAPP|SENDFAC|')]`, `["NEWAPP",true]`},
		{"field setComponent invalidates the message", `msg.getSegment('PID').getField(5).setComponent(2, 'JANE'); return msg.toString().split('\r')[2]`, `"PID|1||MRN1^^^HOSP&1.2.3&ISO^MR~SSN9^^^USSSA^SS||DOE^JANE^Q~ROE^JOHNNY||19800101|M"`},
		{"setComponent encodes", `const f = Hl7Field.parse(''); f.setComponent(1, 'a|b^c~d\\e'); return [f.toString(), f.getComponent(1)]`, `["a\\F\\b\\S\\c\\R\\d\\E\\e","a|b^c~d\\e"]`},
		{"setComponent keeps & without a subcomponent", `const f = Hl7Field.parse(''); f.setComponent(1, 'A&B'); return [f.toString(), f.getComponent(1, 1)]`, `["A&B","B"]`},
		{"setComponent escapes & in a subcomponent", `const f = Hl7Field.parse('X&Y'); f.setComponent(1, 'A&B', 1); return [f.toString(), f.getComponent(1, 1)]`, `["X&A\\T\\B","A&B"]`},
		{"setComponent grows", `const f = Hl7Field.parse('A'); f.setComponent(3, 'C', undefined, 2); return f.toString()`, `"A~~^^C"`},
		{"setComponent grows subcomponents", `const f = Hl7Field.parse('A'); f.setComponent(2, 'S', 2); return f.toString()`, `"A^&&S"`},
		{"setComponent refuses component 0 and negative subcomponent", `const f = Hl7Field.parse('A'); return [f.setComponent(0, 'x'), f.setComponent(1, 'x', -1), f.toString()]`, `[false,false,"A"]`},
		{"segment setComponent", `const s = msg.getSegment('PID'); return [s.setComponent(5, 1, 'ROE'), s.getComponent(5, 1), s.setComponent(99, 1, 'x')]`, `[true,"ROE",false]`},
		{"setSegment by name", `return [msg.setSegment('EVN', Hl7Segment.parse('EVN|A08')), msg.toString().split('\r')[1]]`, `[true,"EVN|A08"]`},
		{"setSegment appends past the end", `return [msg.setSegment(99, Hl7Segment.parse('NTE|1')), msg.segments.length, msg.toString().endsWith('\rNTE|1')]`, `[true,6,true]`},
		{"setSegment MSH only first", `return [msg.setSegment(1, Hl7Segment.parse('MSH|^~\\&')), msg.setSegment('PID', Hl7Segment.parse('MSH|^~\\&')), msg.setSegment(0, Hl7Segment.parse('MSH|^~\\&|B'))]`, `[false,false,true]`},
		{"setSegment non-MSH not first", `return [msg.setSegment(0, Hl7Segment.parse('PID|1')), msg.setSegment('MSH', Hl7Segment.parse('PID|1'))]`, `[false,false]`},
		{"setSegment missing name", `return msg.setSegment('ZZZ', Hl7Segment.parse('ZZZ|1'))`, `false`},
		{"direct array edits show in toString", `msg.segments.push(Hl7Segment.parse('NTE|1')); msg.getSegment('PID').fields[1] = Hl7Field.parse('2'); msg.getSegment('PID').getField(5).components[0][0] = 'X'; const lines = msg.toString().split('\r'); return [lines[2].startsWith('PID|2||'), lines[2].includes('||X^JOHN^Q~'), lines[lines.length - 1]]`, `[true,true,"NTE|1"]`},
		{"lazy and built lookups agree", `const a = msg.getAllSegments('OBX'); const b = msg.segments.filter(s => s.name === 'OBX'); return [a.length, a[0] === b[0], a[1] === b[1], msg.getSegment('OBX') === b[0], msg.getSegment(3) === b[0]]`, `[2,true,true,true,true]`},
		{"edits through a segment invalidate the message", `const s = msg.getSegment('OBX'); msg.toString(); s.setField(5, '80'); return msg.toString().split('\r')[3]`, `"OBX|1|ST|NOTE^Note||80||||||F"`},

		// buildAck.
		{"buildAck default", `const a = msg.buildAck(); const h = a.header; return [a instanceof Hl7Message, h.getField(3).toString(), h.getField(4).toString(), h.getField(5).toString(), h.getField(6).toString(), h.getField(9).toString(), h.getField(11).toString(), h.getField(12).toString(), a.getSegment('MSA').toString()]`,
			`[true,"RECVAPP","RECVFAC","SENDAPP","SENDFAC","ACK^A01^ACK","P","2.5.1","MSA|AA|CTRL42|OK"]`},
		{"buildAck codes", `return ['AA','AE','AR','CA','CE','CR'].map(c => msg.buildAck({ackCode: c}).getSegment('MSA').toString())`,
			`["MSA|AA|CTRL42|OK","MSA|AE|CTRL42|Application Error","MSA|AR|CTRL42|Application Reject","MSA|CA|CTRL42|Commit Accept","MSA|CE|CTRL42|Commit Error","MSA|CR|CTRL42|Commit Reject"]`},
		{"buildAck time and control id", `const h = msg.buildAck().header; return [/^\d{14}(\.\d{3})?$/.test(h.getField(7).toString()), /^\d{20}$/.test(h.getField(10).toString())]`, `[true,true]`},
		{"buildAck errSegment", `const a = msg.buildAck({ackCode: 'AE', errSegment: Hl7Segment.parse('ERR|||207^Application internal error^HL70357|E')}); return [a.segments.length, a.toString().split('\r')[2]]`, `[3,"ERR|||207^Application internal error^HL70357|E"]`},
		{"buildAck message type variants", `return ['ADT', 'ADT^A04', 'ORU^R01^ORU_R01'].map(t => Hl7Message.parse('MSH|^~\\&|A|B|C|D|2024||' + t + '|1|P|2.3').buildAck().header.getField(9).toString())`, `["ACK","ACK^A04","ACK^R01^ACK"]`},
		{"buildAck without MSH-12", `return Hl7Message.parse('MSH|^~\\&|A').buildAck().header.getField(12).toString()`, `"2.5.1"`},
		{"buildAck unknown code", `msg.buildAck({ackCode: 'XX'})`, `throws TypeError`},
		{"buildAck round trip", `const a = msg.buildAck(); return Hl7Message.parse(a.toString()).getSegment('MSA').getField(2).toString()`, `"CTRL42"`},

		// Dates.
		{"parseHl7DateTime offset", `return parseHl7DateTime('20230508103004-0200')`, `"2023-05-08T12:30:04.000Z"`},
		{"parseHl7DateTime fraction", `return parseHl7DateTime('20230508103004.123')`, `"2023-05-08T10:30:04.123Z"`},
		{"parseHl7DateTime tzOffset option", `return parseHl7DateTime('2023', {tzOffset: '-0500'})`, `"2023-01-01T05:00:00.000Z"`},
		{"parseHl7DateTime empty", `return [parseHl7DateTime(''), parseHl7DateTime(undefined)]`, `[null,null]`},
		{"parseHl7DateTime invalid", `return parseHl7DateTime('not a date')`, `undefined`},
		{"formatHl7DateTime date", `return formatHl7DateTime(new Date(Date.UTC(2023, 4, 8, 10, 30, 4, 5)))`, `"20230508103004.005"`},
		{"formatHl7DateTime string", `return formatHl7DateTime('2023-05-08T10:30:04Z')`, `"20230508103004"`},
		{"formatHl7DateTime invalid", `formatHl7DateTime('garbage')`, `throws RangeError: Invalid time value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newRuntime(t)
			if err := DefineExports(rt, rt.GlobalObject()); err != nil { // the date helpers
				t.Fatal(err)
			}
			got := evalJS(t, rt, tt.js)
			if strings.HasPrefix(tt.want, "throws") {
				if !strings.HasPrefix(got, tt.want) {
					t.Errorf("got %s, want %s", got, tt.want)
				}
				return
			}
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// jsonString is s as JSON.stringify writes it.
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

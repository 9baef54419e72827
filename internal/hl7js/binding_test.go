package hl7js

import (
	"strings"
	"testing"

	"github.com/dop251/goja"

	"github.com/fhirgate/fhirgate/internal/hl7"
)

func TestUnwrapReturnedMessages(t *testing.T) {
	tests := []struct {
		name string
		js   string // a function body; its result goes to Unwrap
		ok   bool
		want string // String() of the unwrapped message
	}{
		{"input unchanged", `return input`, true, adtCR},
		{"parsed message", `return Hl7Message.parse('MSH|^~\\&|A\nPID|1')`, true, "MSH|^~\\&|A\rPID|1"},
		{"edited input", `input.getSegment('PID').setField(8, 'F'); return input`, true, strings.Replace(adtCR, "|19800101|M", "|19800101|F", 1)},
		{"ACK", `return input.buildAck({ackCode: 'AE'})`, true, ""},
		{"constructed", `return new Hl7Message([new Hl7Segment(['MSH', '^~\\&', 'APP']), Hl7Segment.parse('NTE|1||hi')])`, true, "MSH|^~\\&|APP\rNTE|1||hi"},
		{"subclass", `class Mine extends Hl7Message {}; return new Mine([Hl7Segment.parse('MSH|^~\\&|Z')])`, true, "MSH|^~\\&|Z"},
		{"own toString is not trusted", `const m = Hl7Message.parse('MSH|^~\\&|A'); m.toString = () => 'MSH|^~\\&|EVIL'; return m`, true, "MSH|^~\\&|A"},
		{"string", `return input.toString()`, false, ""},
		{"plain object", `return {segments: [], toString() { return 'MSH|^~\\&' }}`, false, ""},
		{"segment", `return input.header`, false, ""},
		{"no MSH first", `return new Hl7Message([Hl7Segment.parse('PID|1')])`, false, ""},
		{"toString throws", `return new Hl7Message([null])`, false, ""},
		{"proxy", `return new Proxy({}, {getPrototypeOf() { throw new Error('no') }})`, false, ""},
		{"undefined", `return undefined`, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newRuntime(t)
			v, err := rt.RunString(`(function () {` + tt.js + `})()`)
			if err != nil {
				t.Fatal(err)
			}
			m, ok := Unwrap(rt, v)
			if ok != tt.ok {
				t.Fatalf("Unwrap ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			switch {
			case tt.want != "" && m.String() != tt.want:
				t.Errorf("Unwrap = %q, want %q", m.String(), tt.want)
			case tt.want == "":
				msa, found := m.Segment("MSA")
				if !found || msa.Component(1, 1, hl7.Whole, 0) != "AE" || msa.Component(2, 1, hl7.Whole, 0) != "CTRL42" {
					t.Errorf("ACK = %q", m.String())
				}
			}
		})
	}
}

func TestUnwrapOfUnchangedInputReturnsTheGoMessage(t *testing.T) {
	rt := goja.New()
	m, err := hl7.Parse(adt)
	if err != nil {
		t.Fatal(err)
	}
	v := Wrap(rt, m)
	if err := rt.Set("input", v); err != nil {
		t.Fatal(err)
	}
	// Reading builds objects and arrays but changes nothing.
	if _, err := rt.RunString(`input.getSegment('PID').getField(5).components; input.segments.length; input.getAllSegments('OBX')[1].fields`); err != nil {
		t.Fatal(err)
	}
	if got, ok := Unwrap(rt, v); !ok || got != m {
		t.Errorf("Unwrap = %p, %v; want the wrapped message %p", got, ok, m)
	}
	if _, err := rt.RunString(`input.getSegment('PID').getField(5).setComponent(1, 'ROE')`); err != nil {
		t.Fatal(err)
	}
	got, ok := Unwrap(rt, v)
	if !ok || got == m || !strings.Contains(got.String(), "|ROE^JOHN^Q~") {
		t.Errorf("Unwrap after an edit = %v, %v", got, ok)
	}
}

func TestUnwrapBeforeClassesLoadedIsFalse(t *testing.T) {
	rt := goja.New()
	if err := Install(rt); err != nil {
		t.Fatal(err)
	}
	v, _ := rt.RunString(`({})`)
	if _, ok := Unwrap(rt, v); ok {
		t.Error("Unwrap accepted a plain object")
	}
	if _, ok := Unwrap(goja.New(), v); ok {
		t.Error("Unwrap accepted a value from a runtime without the binding")
	}
}

func TestInstallIsLazyAndSharedWithExports(t *testing.T) {
	rt := goja.New()
	if err := Install(rt); err != nil {
		t.Fatal(err)
	}
	exports := rt.NewObject()
	if err := DefineExports(rt, exports); err != nil {
		t.Fatal(err)
	}
	st, err := stateOf(rt)
	if err != nil {
		t.Fatal(err)
	}
	if st.classes != nil {
		t.Fatal("Install evaluated the classes before any use")
	}
	if err := rt.Set("core", exports); err != nil {
		t.Fatal(err)
	}
	got := evalJS(t, rt, `
		const spread = {...core};
		const m = core.Hl7Message.parse('MSH|^~\\&|A');
		return [
			Object.keys(core),
			m instanceof Hl7Message,
			spread.Hl7Segment === Hl7Segment,
			typeof spread.parseHl7DateTime,
			Object.keys(globalThis).includes('Hl7Message'),
			Object.getOwnPropertyDescriptor(globalThis, 'Hl7Message').writable,
		]`)
	want := `[["Hl7Message","Hl7Segment","Hl7Field","Hl7Context","parseHl7DateTime","formatHl7DateTime"],true,true,"function",false,true]`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if st.classes == nil {
		t.Error("classes not loaded after use")
	}
}

func TestGlobalsCanBeReplacedByBots(t *testing.T) {
	tests := []struct {
		name, js, want string
	}{
		{"assignment before use", `Hl7Message = 42; return Hl7Message`, `42`},
		{"assignment after use", `Hl7Message.parse('MSH|^~\\&'); Hl7Message = 'x'; return Hl7Message`, `"x"`},
		{"typeof", `return [typeof Hl7Message, typeof Hl7Segment, typeof Hl7Field, typeof Hl7Context]`, `["function","function","function","function"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := goja.New()
			if err := Install(rt); err != nil {
				t.Fatal(err)
			}
			if got := evalJS(t, rt, tt.js); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	// A top-level function declaration replaces the accessor too.
	rt := goja.New()
	if err := Install(rt); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.RunString(`function Hl7Field() { return 'mine' }`); err != nil {
		t.Fatal(err)
	}
	if got := evalJS(t, rt, `return Hl7Field()`); got != `"mine"` {
		t.Errorf("function declaration: got %s", got)
	}
}

func TestInstallTwiceKeepsOneBinding(t *testing.T) {
	rt := goja.New()
	for i := 0; i < 2; i++ {
		if err := Install(rt); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := hl7.Parse("MSH|^~\\&|A")
	if err := rt.Set("w", Wrap(rt, m)); err != nil {
		t.Fatal(err)
	}
	if got := evalJS(t, rt, `return w instanceof Hl7Message`); got != "true" {
		t.Errorf("wrapped message is not an instance of the global class: %s", got)
	}
}

func TestBindingStateIsOpaqueToBots(t *testing.T) {
	rt := goja.New()
	if err := Install(rt); err != nil {
		t.Fatal(err)
	}
	got := evalJS(t, rt, `
		const syms = Object.getOwnPropertySymbols(globalThis);
		const s = syms.find(x => String(x) === 'Symbol(fhirgate.hl7js)');
		const d = Object.getOwnPropertyDescriptor(globalThis, s);
		let deleted = true;
		try { deleted = delete globalThis[s]; } catch (e) { deleted = false; }
		return [Object.keys(d.value), d.writable, d.configurable, d.enumerable, deleted];`)
	if got != `[[],false,false,false,false]` {
		t.Errorf("state property: %s", got)
	}
}

func TestWrapIsIndependentOfTheGoMessage(t *testing.T) {
	rt := goja.New()
	m, _ := hl7.Parse("MSH|^~\\&|A\rPID|1")
	if err := rt.Set("w", Wrap(rt, m)); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.RunString(`w.getSegment('PID').setField(1, '2')`); err != nil {
		t.Fatal(err)
	}
	if m.String() != "MSH|^~\\&|A\rPID|1" {
		t.Errorf("Go message changed: %q", m.String())
	}
	// Wrap without Install still yields a working message.
	if got := evalJS(t, rt, `return [w.toString(), typeof Hl7Message]`); got != `["MSH|^~\\&|A\rPID|2","undefined"]` {
		t.Errorf("got %s", got)
	}
}

func TestWrapKeepsNonDefaultDelimiters(t *testing.T) {
	rt := goja.New()
	m, err := hl7.Parse("MSH_:!/$_SRC_FAC\rNTE_1__a/F/b:c!d")
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Set("w", Wrap(rt, m)); err != nil {
		t.Fatal(err)
	}
	got := evalJS(t, rt, `const f = w.getSegment('NTE').getField(3); return [w.context.getMsh2(), f.getComponent(1), f.getComponent(2), f.getComponent(1, undefined, 1), w.header.getField(3).toString()]`)
	if got != `[":!/$","a_b","c","d","SRC"]` {
		t.Errorf("got %s", got)
	}
}

func TestRuntimesInParallel(t *testing.T) {
	// The compiled program and package state are shared between runtimes;
	// run with -race.
	m, err := hl7.Parse(adt)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 8)
	for i := 0; i < 8; i++ {
		go func() {
			rt := goja.New()
			if err := Install(rt); err != nil {
				done <- err.Error()
				return
			}
			if err := rt.Set("input", Wrap(rt, m)); err != nil {
				done <- err.Error()
				return
			}
			v, err := rt.RunString(`input.getSegment('PID').getField(5).getComponent(1) + '/' + input.buildAck().getSegment('MSA').toString()`)
			if err != nil {
				done <- err.Error()
				return
			}
			done <- v.String()
		}()
	}
	for i := 0; i < 8; i++ {
		if got := <-done; got != "DOE/MSA|AA|CTRL42|OK" {
			t.Errorf("runtime %d: %s", i, got)
		}
	}
}

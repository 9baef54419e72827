package hl7js

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"

	"github.com/fhirgate/fhirgate/internal/hl7"
)

//go:embed hl7.js
var source string

// program is hl7.js compiled once per process; goja programs are immutable
// and shared safely between runtimes.
var program = sync.OnceValues(func() (*goja.Program, error) {
	return goja.Compile("@medplum/core/hl7.js", source, true)
})

// names are the bindings Install and DefineExports provide, in order.
var (
	globalNames = []string{"Hl7Message", "Hl7Segment", "Hl7Field", "Hl7Context"}
	exportNames = []string{"Hl7Message", "Hl7Segment", "Hl7Field", "Hl7Context", "parseHl7DateTime", "formatHl7DateTime"}
)

// stateKey holds a runtime's *state on its global object. A symbol keeps it
// out of the way of bot code; the value is an opaque host object (no exported
// fields or methods), non-writable and non-configurable.
var stateKey = goja.NewSymbol("fhirgate.hl7js")

// state is the per-runtime binding: nil until the classes are needed.
type state struct {
	rt       *goja.Runtime
	classes  *goja.Object  // what hl7.js returns
	msgProto *goja.Object  // Hl7Message.prototype, for Unwrap
	fromRaw  goja.Callable // messageFromRaw(text, msh1, msh2)
	toString goja.Callable // Hl7Message.prototype.toString
}

// stateOf returns rt's state, creating an empty one on first call.
func stateOf(rt *goja.Runtime) (*state, error) {
	g := rt.GlobalObject()
	if v := g.GetSymbol(stateKey); v != nil {
		if st, ok := v.Export().(*state); ok {
			return st, nil
		}
	}
	st := &state{rt: rt}
	if err := g.DefineDataPropertySymbol(stateKey, rt.ToValue(st), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE); err != nil {
		return nil, fmt.Errorf("storing HL7 binding state: %w", err)
	}
	return st, nil
}

// load evaluates hl7.js in the runtime, once.
func (st *state) load() error {
	if st.classes != nil {
		return nil
	}
	prg, err := program()
	if err != nil {
		return fmt.Errorf("compiling hl7.js: %w", err)
	}
	rt := st.rt
	fv, err := rt.RunProgram(prg)
	if err != nil {
		return fmt.Errorf("evaluating hl7.js: %w", err)
	}
	factory, ok := goja.AssertFunction(fv)
	if !ok {
		return errors.New("evaluating hl7.js: not a function")
	}
	cv, err := factory(goja.Undefined(), st.natives())
	if err != nil {
		return fmt.Errorf("evaluating hl7.js: %w", err)
	}
	classes := cv.ToObject(rt)
	fromRaw, ok1 := goja.AssertFunction(classes.Get("messageFromRaw"))
	toString, ok2 := goja.AssertFunction(classes.Get("toString"))
	ctor := classes.Get("Hl7Message").ToObject(rt)
	proto, ok3 := ctor.Get("prototype").(*goja.Object)
	if !ok1 || !ok2 || !ok3 {
		return errors.New("evaluating hl7.js: missing exports")
	}
	st.classes, st.fromRaw, st.toString, st.msgProto = classes, fromRaw, toString, proto
	return nil
}

// value returns one of the public classes or functions, loading them first.
// It panics with a JavaScript error when loading fails, which only happens
// when the runtime is being interrupted.
func (st *state) value(name string) goja.Value {
	if err := st.load(); err != nil {
		panic(st.rt.NewGoError(err))
	}
	return st.classes.Get(name)
}

// natives returns the Go helpers hl7.js calls.
func (st *state) natives() *goja.Object {
	rt := st.rt
	n := rt.NewObject()
	set := func(name string, fn func(goja.FunctionCall) goja.Value) {
		_ = n.Set(name, fn) // a fresh plain object: Set cannot fail
	}
	set("parse", func(c goja.FunctionCall) goja.Value {
		m, err := hl7.Parse(c.Argument(0).String())
		if err != nil {
			return rt.ToValue(strings.TrimPrefix(err.Error(), "hl7: "))
		}
		d := m.Delimiters()
		return rt.NewArray(m.String(), string(d.Field), d.Encoding())
	})
	set("decode", func(c goja.FunctionCall) goja.Value {
		v := c.Argument(0).String()
		d, ok := delimiters(c, 1)
		if !ok {
			return c.Argument(0)
		}
		return rt.ToValue(d.Decode(v))
	})
	set("encode", func(c goja.FunctionCall) goja.Value {
		v := c.Argument(0).String()
		d, ok := delimiters(c, 1)
		if !ok {
			return c.Argument(0)
		}
		if c.Argument(6).ToBoolean() {
			d.Subcomponent = 0 // keep it as a separator
		}
		return rt.ToValue(d.Encode(v))
	})
	set("controlId", func(c goja.FunctionCall) goja.Value {
		return rt.ToValue(hl7.NewControlID(time.UnixMilli(c.Argument(0).ToInteger())))
	})
	set("formatDateTime", func(c goja.FunctionCall) goja.Value {
		return rt.ToValue(hl7.FormatDateTime(time.UnixMilli(c.Argument(0).ToInteger())))
	})
	set("parseDateTime", func(c goja.FunctionCall) goja.Value {
		var loc *time.Location
		if tz := c.Argument(1).String(); tz != "" {
			z, err := hl7.ParseOffset(tz)
			if err != nil {
				return goja.Undefined()
			}
			loc = z
		}
		t, err := hl7.ParseDateTime(c.Argument(0).String(), loc)
		if err != nil {
			return goja.Undefined()
		}
		return rt.ToValue(t.UTC().Format("2006-01-02T15:04:05.000Z"))
	})
	return n
}

// delimiters reads fs, cs, rs, ec, ss from the five string arguments at
// from. Each must be one byte or empty (undeclared); anything else (a
// bot-made Hl7Context with longer separators) is reported as not ok and
// values pass through as is.
func delimiters(c goja.FunctionCall, from int) (hl7.Delimiters, bool) {
	var b [5]byte
	for i := range b {
		s := c.Argument(from + i).String()
		switch len(s) {
		case 0:
		case 1:
			b[i] = s[0]
		default:
			return hl7.Delimiters{}, false
		}
	}
	return hl7.Delimiters{Field: b[0], Component: b[1], Repetition: b[2], Escape: b[3], Subcomponent: b[4]}, true
}

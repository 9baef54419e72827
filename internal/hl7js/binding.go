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
	fromGo   goja.Callable // messageFromGo(handle, text, msh1, msh2)
	toString goja.Callable // Hl7Message.prototype.toString
	handleOf goja.Callable // the handle of a parsed message, or undefined
}

// handle is the Go message behind a parsed JavaScript Hl7Message. JavaScript
// sees an opaque object (no exported fields or methods) and never changes
// the message: edits happen on the JavaScript objects.
type handle struct{ m *hl7.Message }

// existingState returns rt's state, or nil when nothing has made one yet.
func existingState(rt *goja.Runtime) *state {
	if v := rt.GlobalObject().GetSymbol(stateKey); v != nil {
		if st, ok := v.Export().(*state); ok {
			return st
		}
	}
	return nil
}

// stateOf returns rt's state, creating an empty one on first call.
func stateOf(rt *goja.Runtime) (*state, error) {
	if st := existingState(rt); st != nil {
		return st, nil
	}
	st := &state{rt: rt}
	if err := rt.GlobalObject().DefineDataPropertySymbol(stateKey, rt.ToValue(st), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE); err != nil {
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
	fromGo, ok1 := goja.AssertFunction(classes.Get("messageFromGo"))
	toString, ok2 := goja.AssertFunction(classes.Get("toString"))
	handleOf, ok3 := goja.AssertFunction(classes.Get("handleOf"))
	ctor := classes.Get("Hl7Message").ToObject(rt)
	proto, ok4 := ctor.Get("prototype").(*goja.Object)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return errors.New("evaluating hl7.js: missing exports")
	}
	st.classes, st.fromGo, st.toString, st.handleOf, st.msgProto = classes, fromGo, toString, handleOf, proto
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
		return rt.NewArray(rt.ToValue(&handle{m}), m.String(), string(d.Field), d.Encoding())
	})
	set("line", func(c goja.FunctionCall) goja.Value {
		m := messageOf(c.Argument(0))
		s, ok := m.SegmentAt(int(c.Argument(1).ToInteger()))
		if !ok {
			return goja.Undefined()
		}
		return rt.ToValue(s.String())
	})
	set("find", func(c goja.FunctionCall) goja.Value {
		m := messageOf(c.Argument(0))
		name, rs, cs := c.Argument(1).String(), c.Argument(2).String(), c.Argument(3).String()
		for i := 0; i < m.NumSegments(); i++ {
			if s, _ := m.SegmentAt(i); medplumName(s, rs, cs) == name {
				return rt.ToValue(i)
			}
		}
		return rt.ToValue(-1)
	})
	set("names", func(c goja.FunctionCall) goja.Value {
		m := messageOf(c.Argument(0))
		rs, cs := c.Argument(1).String(), c.Argument(2).String()
		names := make([]any, m.NumSegments())
		for i := range names {
			s, _ := m.SegmentAt(i)
			names[i] = medplumName(s, rs, cs)
		}
		return rt.NewArray(names...)
	})
	set("findAll", func(c goja.FunctionCall) goja.Value {
		m := messageOf(c.Argument(0))
		name, rs, cs := c.Argument(1).String(), c.Argument(2).String(), c.Argument(3).String()
		var found []any
		for i := 0; i < m.NumSegments(); i++ {
			if s, _ := m.SegmentAt(i); medplumName(s, rs, cs) == name {
				found = append(found, i)
			}
		}
		return rt.NewArray(found...)
	})
	set("field", func(c goja.FunctionCall) goja.Value {
		text, sep := c.Argument(0).String(), c.Argument(2).String()
		i := int(c.Argument(1).ToInteger())
		if len(sep) != 1 {
			if i == 0 && sep == "" {
				return c.Argument(0)
			}
			return goja.Undefined()
		}
		for ; i > 0; i-- {
			k := strings.IndexByte(text, sep[0])
			if k < 0 {
				return goja.Undefined()
			}
			text = text[k+1:]
		}
		if k := strings.IndexByte(text, sep[0]); k >= 0 {
			text = text[:k]
		}
		return rt.ToValue(text)
	})
	set("component", func(c goja.FunctionCall) goja.Value {
		d, ok := delimiters(c, 4)
		if !ok {
			return goja.Undefined()
		}
		f := hl7.ParseField(c.Argument(0).String(), d)
		rep := int(c.Argument(3).ToInteger())
		if rep < 0 || rep >= f.Repetitions() {
			return goja.Null()
		}
		return rt.ToValue(f.Component(int(c.Argument(1).ToInteger()), int(c.Argument(2).ToInteger()), rep))
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
	set("ack", func(c goja.FunctionCall) goja.Value {
		// buildAck's ACK of a message as parsed, in its delimiters; undefined when Go cannot
		// build the same text (hl7.js then builds it field by field).
		m := messageOf(c.Argument(0))
		if m == emptyMessage || len(m.Delimiters().Encoding()) != 4 {
			return goja.Undefined()
		}
		ack, err := m.BuildAck(hl7.AckOptions{Code: hl7.AckCode(c.Argument(1).String()), Now: time.UnixMilli(c.Argument(2).ToInteger())})
		if err != nil {
			return goja.Undefined()
		}
		return rt.NewArray(rt.ToValue(&handle{ack}), ack.String())
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

// messageOf returns the Go message behind a handle; a value that is not a
// handle (a bot reached the internals) reads as an empty message.
func messageOf(v goja.Value) *hl7.Message {
	if h, ok := v.Export().(*handle); ok && h != nil && h.m != nil {
		return h.m
	}
	return emptyMessage
}

// emptyMessage stands in for a missing handle. It is never modified, so
// sharing it between runtimes is safe.
var emptyMessage, _ = hl7.Parse("MSH|^~\\&")

// medplumName is Medplum's name for a segment: fields[0].components[0][0],
// i.e. the text before the first field, repetition or component separator.
func medplumName(s hl7.Segment, rs, cs string) string {
	name := s.Name()
	if i := strings.Index(name, rs); rs != "" && i >= 0 {
		name = name[:i]
	}
	if i := strings.Index(name, cs); cs != "" && i >= 0 {
		name = name[:i]
	}
	return name
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

package hl7js

import (
	"fmt"

	"github.com/dop251/goja"

	"github.com/fhirgate/fhirgate/internal/hl7"
)

// Install defines Hl7Message, Hl7Segment, Hl7Field and Hl7Context as globals
// of rt, like the classes a Medplum bot may reference without importing. The
// globals are accessors that evaluate the classes on first read and then
// become plain writable, non-enumerable data properties; assigning to one
// replaces it, as for any global.
func Install(rt *goja.Runtime) error {
	st, err := stateOf(rt)
	if err != nil {
		return err
	}
	g := rt.GlobalObject()
	for _, name := range globalNames {
		get, set := st.lazy(g, name, goja.FLAG_FALSE)
		if err := g.DefineAccessorProperty(name, get, set, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			return fmt.Errorf("defining global %s: %w", name, err)
		}
	}
	return nil
}

// DefineExports adds Hl7Message, Hl7Segment, Hl7Field, Hl7Context,
// parseHl7DateTime and formatHl7DateTime to obj, the exports of
// require('@medplum/core') (or an object spread into them). They are
// enumerable accessors that load the classes on first read and then become
// data properties, so obj stays cheap to build for bots that never use HL7.
func DefineExports(rt *goja.Runtime, obj *goja.Object) error {
	st, err := stateOf(rt)
	if err != nil {
		return err
	}
	for _, name := range exportNames {
		get, set := st.lazy(obj, name, goja.FLAG_TRUE)
		if err := obj.DefineAccessorProperty(name, get, set, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
			return fmt.Errorf("defining export %s: %w", name, err)
		}
	}
	return nil
}

// lazy returns the getter and setter of a lazily loaded property of obj.
// Both replace the accessor by a data property; if that fails (obj was
// frozen meanwhile) the getter keeps answering.
func (st *state) lazy(obj *goja.Object, name string, enumerable goja.Flag) (get, set goja.Value) {
	rt := st.rt
	get = rt.ToValue(func(goja.FunctionCall) goja.Value {
		v := st.value(name)
		_ = obj.DefineDataProperty(name, v, goja.FLAG_TRUE, goja.FLAG_TRUE, enumerable)
		return v
	})
	set = rt.ToValue(func(c goja.FunctionCall) goja.Value {
		_ = obj.DefineDataProperty(name, c.Argument(0), goja.FLAG_TRUE, goja.FLAG_TRUE, enumerable)
		return goja.Undefined()
	})
	return get, set
}

// Wrap returns m as a JavaScript Hl7Message of rt, for a bot's event.input.
// JavaScript never changes m (edits are made on the JavaScript objects), but
// m must not be changed while rt may still read it. Wrap panics with a goja exception if the classes
// cannot be loaded, which happens only when rt is being interrupted.
func Wrap(rt *goja.Runtime, m *hl7.Message) goja.Value {
	st, err := stateOf(rt)
	if err != nil {
		panic(rt.NewGoError(err))
	}
	if err := st.load(); err != nil {
		panic(rt.NewGoError(err))
	}
	d := m.Delimiters()
	v, err := st.fromGo(goja.Undefined(), rt.ToValue(&handle{m}), rt.ToValue(m.String()), rt.ToValue(string(d.Field)), rt.ToValue(d.Encoding()))
	if err != nil {
		panic(err)
	}
	return v
}

// Unwrap returns v as a Go message when v is an Hl7Message of rt (an
// instance of its class, whether from Wrap, Hl7Message.parse, buildAck or
// the constructor). A message unchanged since Wrap or parse is returned as
// the Go message behind it; otherwise Unwrap serialises v with
// Hl7Message.prototype.toString (not v's own toString) and parses the
// result. ok is false when v is something else, when serialising throws, or
// when the text is not a valid message (for example a message built without
// an MSH segment first).
func Unwrap(rt *goja.Runtime, v goja.Value) (m *hl7.Message, ok bool) {
	obj, isObj := v.(*goja.Object)
	if !isObj {
		return nil, false
	}
	// Looked up, not created: most results are not HL7, and making the
	// state costs more than the rest of this check.
	st := existingState(rt)
	if st == nil || st.classes == nil {
		return nil, false // the classes were never loaded, so v cannot be one
	}
	var s, h goja.Value
	var err error
	if ex := rt.Try(func() {
		if st.isMessage(obj) {
			if s, err = st.toString(obj); err == nil {
				h, err = st.handleOf(goja.Undefined(), obj)
			}
		}
	}); ex != nil || err != nil || s == nil {
		return nil, false
	}
	text := s.String()
	if hd, ok := h.Export().(*handle); ok && hd != nil && hd.m != nil && hd.m.String() == text {
		return hd.m, true // unchanged since it was parsed
	}
	m, err = hl7.Parse(text)
	if err != nil {
		return nil, false
	}
	return m, true
}

// isMessage reports whether Hl7Message.prototype is on obj's prototype
// chain. It may run a Proxy's getPrototypeOf trap, so callers wrap it in
// rt.Try.
func (st *state) isMessage(obj *goja.Object) bool {
	for p := obj.Prototype(); p != nil; p = p.Prototype() {
		if p == st.msgProto {
			return true
		}
	}
	return false
}

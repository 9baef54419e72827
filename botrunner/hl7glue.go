package botrunner

import (
	"strings"

	"github.com/dop251/goja"

	"github.com/fhirgate/fhirgate/internal/hl7"
	"github.com/fhirgate/fhirgate/internal/hl7js"
)

// HL7 v2 support comes from package hl7js: Medplum's Hl7Message classes, evaluated in a runtime
// only when a bot touches them, as '@medplum/core' exports and as globals (see sandboxGlobals).

// defineHL7Exports adds the HL7 classes and date helpers to obj, the "hl7" group of the
// '@medplum/core' exports.
func (x *execution) defineHL7Exports(obj *goja.Object) {
	if err := hl7js.DefineExports(x.rt, obj); err != nil {
		panic(x.rt.NewGoError(err))
	}
}

// wrapHL7 is an HL7 request body as the bot's Hl7Message input.
func (x *execution) wrapHL7(m *hl7.Message) goja.Value {
	return hl7js.Wrap(x.rt, m)
}

// hl7Result serialises obj when it is an Hl7Message.
func (x *execution) hl7Result(obj *goja.Object) (string, bool) {
	m, ok := hl7js.Unwrap(x.rt, obj)
	if !ok {
		return "", false
	}
	return m.String(), true
}

// hl7String is an Hl7Message as console text: one segment per line.
func (x *execution) hl7String(obj *goja.Object) (string, bool) {
	s, ok := x.hl7Result(obj)
	return strings.ReplaceAll(s, "\r", "\n"), ok
}

package botrunner

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/dop251/goja"

	"github.com/fhirgate/fhirgate/internal/fhir"
)

// Content-Type header values of results. Bodies are always UTF-8.
const (
	ContentTypeText = MediaText + "; charset=utf-8"
	ContentTypeJSON = MediaJSON + "; charset=utf-8"
	ContentTypeFHIR = fhir.ContentType
	ContentTypeHL7  = MediaHL7 + "; charset=utf-8"
)

// allOKBody is the answer for a handler that returns undefined.
var allOKBody = mustJSON(fhir.AllOK())

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// mapResult turns the handler's value into the HTTP answer (DESIGN.md, "$execute rules"):
// undefined → all-ok OperationOutcome; string → text/plain (HL7 type when the request was HL7);
// Hl7Message → HL7 text; object with a string resourceType → FHIR JSON; any other JSON value →
// application/json. Values JSON cannot express (BigInt, cycles, functions, symbols) are errors.
func (x *execution) mapResult(v goja.Value) *Result {
	if v == nil || goja.IsUndefined(v) {
		return &Result{Outcome: OutcomeSuccess, Body: allOKBody, ContentType: ContentTypeFHIR}
	}
	if goja.IsString(v) {
		ct := ContentTypeText
		if x.req.Event.Input.Kind == InputHL7 {
			ct = ContentTypeHL7
		}
		return x.success([]byte(v.String()), ct)
	}
	ct := ContentTypeJSON
	if obj, ok := v.(*goja.Object); ok {
		if s, ok := x.hl7Result(obj); ok {
			return x.success([]byte(s), ContentTypeHL7)
		}
		var rt goja.Value
		if ex := x.rt.Try(func() { rt = obj.Get("resourceType") }); ex != nil {
			return x.errorResult(ex)
		}
		if rt != nil && goja.IsString(rt) {
			ct = ContentTypeFHIR
		}
	}
	body, err := x.stringifyBytes(v)
	if err != nil {
		if isUncatchable(err) {
			return x.errorResult(err)
		}
		msg := err.Error()
		if ex, ok := err.(*goja.Exception); ok {
			msg = x.errorString(ex.Value())
		}
		return x.failure(OutcomeError, "bot result cannot be serialized as JSON: "+msg)
	}
	if len(body) == 0 {
		return x.failure(OutcomeError, fmt.Sprintf("bot returned a %s, which cannot be serialized as JSON", typeOf(v)))
	}
	return x.success(body, ct)
}

// stringify serializes v as JSON.stringify does; "" means the value has no JSON form.
//
// An object that is not a function goes through goja's own serializer (Object.MarshalJSON: the
// algorithm of JSON.stringify, toJSON included) instead of the runtime's global JSON object.
// Building that object and its methods was some 3% of a trivial run. It is also what Medplum
// does: the host, not the bot's context, serializes the answer, so a bot that replaces
// JSON.stringify does not change how its answer is sent. An object whose toJSON gives back
// nothing serializable reads as "null" there, so "null" is checked again the slow way.
// Everything else (primitives, functions) is rare and goes through JSON.stringify, looked up on
// first use.
func (x *execution) stringify(v goja.Value) (string, error) {
	b, err := x.stringifyBytes(v)
	return string(b), err
}

// stringifyBytes is stringify giving bytes; nil means the value has no JSON form. An object's
// bytes are the serializer's own buffer, not a copy: the answer's body is taken as it is.
func (x *execution) stringifyBytes(v goja.Value) ([]byte, error) {
	if obj, ok := v.(*goja.Object); ok {
		if _, isFunc := goja.AssertFunction(obj); !isFunc {
			b, err := obj.MarshalJSON()
			if err != nil {
				return nil, err
			}
			if string(b) != "null" {
				return b, nil
			}
		}
	}
	s, err := x.stringifySlow(v)
	if s == "" {
		return nil, err
	}
	return []byte(s), err
}

// stringifySlow calls the realm's own JSON.stringify.
func (x *execution) stringifySlow(v goja.Value) (string, error) {
	if x.jsonStringify == nil {
		if ex := x.rt.Try(func() {
			x.jsonStringify, _ = goja.AssertFunction(x.rt.Get("JSON").ToObject(x.rt).Get("stringify"))
		}); ex != nil {
			return "", ex
		}
		if x.jsonStringify == nil {
			return "", errors.New("JSON.stringify is not a function")
		}
	}
	r, err := x.jsonStringify(goja.Undefined(), v)
	if err != nil {
		return "", err
	}
	if r == nil || goja.IsUndefined(r) {
		return "", nil
	}
	return r.String(), nil
}

func (x *execution) success(body []byte, ct string) *Result {
	if len(body) > x.r.opts.MaxResultBytes {
		return x.failure(OutcomeError, fmt.Sprintf("bot result is %d bytes, more than the limit of %d", len(body), x.r.opts.MaxResultBytes))
	}
	return &Result{Outcome: OutcomeSuccess, Body: body, ContentType: ct}
}

// finish gives an error or timeout Result its body: an OperationOutcome with the message.
func finish(res *Result) *Result {
	boundMessage(res)
	if res.Outcome != OutcomeSuccess && res.Body == nil {
		res.Body = mustJSON(fhir.NewOutcome(http.StatusBadRequest, res.Message))
		res.ContentType = ContentTypeFHIR
	}
	return res
}

// maxErrorMessage bounds a failed run's message, in both isolation modes: a bot can throw an
// error whose message is as large as its memory, and the message is answered, audited and (from
// a worker) sent in one frame.
const maxErrorMessage = 64 << 10

// boundMessage cuts a failed run's message to maxErrorMessage bytes, and drops a body built from
// the longer one.
func boundMessage(res *Result) {
	if res.Outcome == OutcomeSuccess || len(res.Message) <= maxErrorMessage {
		return
	}
	res.Message = truncate(res.Message, maxErrorMessage) + " [truncated]"
	res.Body = nil
}

// typeOf names the values, besides undefined, that JSON.stringify cannot express.
func typeOf(v goja.Value) string {
	if _, ok := goja.AssertFunction(v); ok {
		return "function"
	}
	if _, ok := v.(*goja.Symbol); ok {
		return "symbol"
	}
	return "value whose toJSON gives nothing JSON can express"
}

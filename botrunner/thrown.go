package botrunner

import (
	"encoding/json"

	"github.com/dop251/goja"
)

// thrownFailure is the Result of a run whose handler threw (or rejected with) v. As Medplum's
// vmcontext and Lambda runners answer (normalizeOperationOutcome of the error, status 400), the
// body is the thrown OperationOutcomeError's own outcome — severity, code, diagnostics and id as
// the bot wrote them, or as the medplum client got them from the backend — and any other error
// becomes badRequest of its message (what finish would write). The message is
// normalizeErrorString, as before, for the audit and the log.
func (x *execution) thrownFailure(v goja.Value) *Result {
	res := x.failure(OutcomeError, x.errorString(v))
	if body := x.thrownOutcome(v); body != nil {
		res.Body, res.ContentType = body, ContentTypeFHIR
	}
	return res
}

// thrownOutcome is the JSON of normalizeOperationOutcome(v), or nil when that is not an
// OperationOutcome that serializes (a bot can throw anything) or is larger than an error
// message may be; the caller then answers badRequest of the message.
func (x *execution) thrownOutcome(v goja.Value) (body []byte) {
	defer func() {
		if recover() != nil {
			body = nil
		}
	}()
	var s string
	ex := x.rt.Try(func() {
		fn, ok := goja.AssertFunction(x.coreModule().Get("normalizeOperationOutcome"))
		if !ok {
			return
		}
		o, err := fn(goja.Undefined(), v)
		if err != nil {
			return
		}
		obj, ok := o.(*goja.Object)
		if !ok || obj.Get("resourceType") == nil || obj.Get("resourceType").String() != "OperationOutcome" {
			return
		}
		s, err = x.stringify(obj)
		if err != nil {
			s = ""
		}
	})
	if ex != nil || s == "" || len(s) > maxErrorMessage || !json.Valid([]byte(s)) {
		return nil
	}
	return []byte(s)
}

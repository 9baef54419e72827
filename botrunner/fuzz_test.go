package botrunner

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fhirgate/fhirgate/internal/fhir"
)

// FuzzParseInput feeds ParseInput arbitrary Content-Type headers and bodies.
// It must never panic; every refusal must be an *InputError with status 400
// or 415 and a message; and whatever it accepts must be what the bot is
// promised for its kind (a JSON object or array no deeper than MaxJSONDepth,
// a FHIR resource of a known type, valid UTF-8 text, a form, an HL7
// message). Seeds: testdata/fuzz/FuzzParseInput and the cases below.
func FuzzParseInput(f *testing.F) {
	for _, s := range []struct{ contentType, body string }{
		{"", ""},
		{"", "x"},
		{MediaText, "hello"},
		{MediaText + "; charset=latin1", "x"},
		{MediaJSON, `{"a":[1,2,{"b":null}]}`},
		{MediaJSON, "\ufeff[]"},
		{MediaJSON, `42`},
		{MediaJSON, strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1)},
		{MediaFHIR, `{"resourceType":"Patient","id":"1"}`},
		{MediaFHIR, `{"resource\u0054ype":"Bundle","meta":{"resourceType":"x"}}`},
		{MediaFHIR, `{"resourceType":1}`},
		{MediaForm, "a=1&b=x+y&c=%C3%A9"},
		{MediaForm, "a=1&a=2"},
		{MediaForm, "a=%ff"},
		{MediaHL7, "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5\rPID|1||123\r"},
		{MediaHL7, "\x0bMSH|^~\\&|A\r\x1c\r"},
		{"application/xml", "<a/>"},
		{"text/plain;;", "x"},
		{"Application/JSON; charset=UTF-8", "{}"},
	} {
		f.Add(s.contentType, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		in, err := ParseInput(contentType, body)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error %T (%v) is not an *InputError", err, err)
			}
			if ie.Status != http.StatusBadRequest && ie.Status != http.StatusUnsupportedMediaType {
				t.Fatalf("status %d, want 400 or 415: %s", ie.Status, ie.Message)
			}
			if ie.Message == "" || !utf8.ValidString(ie.Message) {
				t.Fatalf("message %q must be non-empty UTF-8", ie.Message)
			}
			return
		}
		checkAccepted(t, in, body)
	})
}

// checkAccepted verifies what ParseInput promises for an accepted body.
func checkAccepted(t *testing.T, in Input, body []byte) {
	t.Helper()
	if len(body) > 0 && !utf8.Valid(body) {
		t.Fatalf("accepted a body that is not UTF-8 as kind %d", in.Kind)
	}
	switch in.Kind {
	case InputJSON, InputFHIR:
		var v any
		if err := json.Unmarshal(in.JSON, &v); err != nil {
			t.Fatalf("accepted JSON does not decode: %v", err)
		}
		if depth := jsonDepth(v); depth > MaxJSONDepth {
			t.Fatalf("accepted JSON nested %d deep", depth)
		}
		switch v := v.(type) {
		case map[string]any:
			if in.Kind == InputFHIR {
				rt, _ := v["resourceType"].(string)
				if rt != in.ResourceType || !fhir.IsResourceType(rt) {
					t.Fatalf("resourceType %q reported as %q", rt, in.ResourceType)
				}
			}
		case []any:
			if in.Kind == InputFHIR {
				t.Fatal("accepted an array as a FHIR resource")
			}
		default:
			t.Fatalf("accepted a JSON %T, want an object or array", v)
		}
	case InputText:
		if in.Text != string(body) {
			t.Fatalf("text %q differs from the body", in.Text)
		}
	case InputForm:
		if in.Form == nil {
			t.Fatal("form input without a map")
		}
		for k, v := range in.Form {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				t.Fatalf("form field %q=%q is not UTF-8", k, v)
			}
		}
	case InputHL7:
		if in.HL7 == nil || in.HL7.NumSegments() == 0 {
			t.Fatal("HL7 input without a message")
		}
	default:
		t.Fatalf("unknown kind %d", in.Kind)
	}
}

// jsonDepth is the nesting depth of decoded JSON (a scalar is 0).
func jsonDepth(v any) int {
	best := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			best = max(best, jsonDepth(e))
		}
	case []any:
		for _, e := range v {
			best = max(best, jsonDepth(e))
		}
	default:
		return 0
	}
	return best + 1
}

package botrunner

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseInputAcceptsEachSupportedType(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		body        string
		want        Input
	}{
		{"text", "text/plain", "hello\nworld", Input{Kind: InputText, Text: "hello\nworld"}},
		{"text with charset", "text/plain; charset=UTF-8", "héllo", Input{Kind: InputText, Text: "héllo"}},
		{"text us-ascii", "text/plain;charset=us-ascii", "plain", Input{Kind: InputText, Text: "plain"}},
		{"empty text", "text/plain", "", Input{Kind: InputText, Text: ""}},
		{"json object", "application/json", ` {"a": [1, 2]} `, Input{Kind: InputJSON, JSON: []byte(` {"a": [1, 2]} `)}},
		{"json array", "application/json; charset=utf-8", `[1,"x"]`, Input{Kind: InputJSON, JSON: []byte(`[1,"x"]`)}},
		{"json with BOM", "application/json", "\ufeff{}", Input{Kind: InputJSON, JSON: []byte(`{}`)}},
		{"empty json is an empty object", "application/json", "", Input{Kind: InputJSON, JSON: []byte(`{}`)}},
		{"blank json is an empty object", "application/json", " \n", Input{Kind: InputJSON, JSON: []byte(`{}`)}},
		{"no content type and no body", "", "", Input{Kind: InputJSON, JSON: []byte(`{}`)}},
		{"upper-case media type", "Application/JSON", `{}`, Input{Kind: InputJSON, JSON: []byte(`{}`)}},
		{
			"fhir resource", "application/fhir+json", `{"resourceType":"Patient","id":"1","name":[{"family":"X"}]}`,
			Input{Kind: InputFHIR, ResourceType: "Patient", JSON: []byte(`{"resourceType":"Patient","id":"1","name":[{"family":"X"}]}`)},
		},
		{
			"fhir resourceType after nested members", "application/fhir+json; charset=utf-8",
			`{"meta":{"resourceType":"Nope"},"contained":[{"resourceType":"Nope"}],"resourceType":"Observation"}`,
			Input{Kind: InputFHIR, ResourceType: "Observation",
				JSON: []byte(`{"meta":{"resourceType":"Nope"},"contained":[{"resourceType":"Nope"}],"resourceType":"Observation"}`)},
		},
		{
			"fhir escaped member name", "application/fhir+json", `{"resource\u0054ype":"Bundle"}`,
			Input{Kind: InputFHIR, ResourceType: "Bundle", JSON: []byte(`{"resource\u0054ype":"Bundle"}`)},
		},
		{"form", "application/x-www-form-urlencoded", "a=1&b=x+y&c=%C3%A9&d=", Input{Kind: InputForm, Form: map[string]string{"a": "1", "b": "x y", "c": "é", "d": ""}}},
		{"empty form", "application/x-www-form-urlencoded", "", Input{Kind: InputForm, Form: map[string]string{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseInput(tc.contentType, []byte(tc.body))
			if err != nil {
				t.Fatalf("ParseInput: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v (JSON %q), want %+v (JSON %q)", got, got.JSON, tc.want, tc.want.JSON)
			}
		})
	}
}

// Medplum's own types (Bot, ProjectMembership …) are resources there too:
// a scheduled bot's input is its Bot.
func TestParseInputAcceptsEveryR4AndMedplumResourceTypeAndNoOther(t *testing.T) {
	for _, rt := range []string{"Patient", "Bundle", "Parameters", "VisionPrescription", "Account", "SubstanceSpecification", "Bot", "ProjectMembership"} {
		if _, err := ParseInput(MediaFHIR, []byte(`{"resourceType":"`+rt+`"}`)); err != nil {
			t.Errorf("%s: %v", rt, err)
		}
	}
	for _, rt := range []string{"patient", "Resource", "DomainResource", "bot", "ActorDefinition"} {
		if _, err := ParseInput(MediaFHIR, []byte(`{"resourceType":"`+rt+`"}`)); err == nil {
			t.Errorf("%s accepted", rt)
		}
	}
}

func TestParseInputRejects(t *testing.T) {
	deep := strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1)
	okDeep := strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth)
	if _, err := ParseInput(MediaJSON, []byte(okDeep)); err != nil {
		t.Fatalf("depth %d rejected: %v", MaxJSONDepth, err)
	}
	tests := []struct {
		name        string
		contentType string
		body        string
		status      int
		message     string // substring
		expression  string
	}{
		{"unsupported type", "application/xml", "<a/>", 415, "unsupported Content-Type 'application/xml'; supported types: text/plain, application/json, application/fhir+json, application/x-www-form-urlencoded, x-application/hl7-v2+er7", ""},
		{"octet stream", "application/octet-stream", "", 415, "supported types", ""},
		{"body without content type", "", "hello", 415, "needs a Content-Type", ""},
		{"malformed content type", "text/plain; charset", "x", 400, "malformed Content-Type", ""},
		{"latin-1 charset", "text/plain; charset=ISO-8859-1", "x", 415, "unsupported charset 'ISO-8859-1'", ""},
		{"utf-16 json", "application/json; charset=utf-16", "{}", 415, "unsupported charset", ""},
		{"invalid utf-8 text", "text/plain", "caf\xe9", 400, "not valid UTF-8", ""},
		{"invalid utf-8 json", "application/json", "{\"a\":\"\xff\"}", 400, "not valid UTF-8", ""},
		{"bad json", "application/json", "{\n  \"a\": 1,\n  \"b\": x\n}", 400, "invalid JSON at line 3, column 8 (byte offset 19)", ""},
		{"truncated json", "application/json", `{"a": [1, 2`, 400, "invalid JSON at line 1, column 12", ""},
		{"trailing garbage", "application/json", `{} {}`, 400, "invalid JSON", ""},
		{"json string", "application/json", `"hello"`, 400, "must be an object or an array, not a bare string", ""},
		{"json number", "application/json", `42`, 400, "not a bare number", ""},
		{"json null", "application/json", `null`, 400, "not a bare null", ""},
		{"json too deep", "application/json", deep, 400, "nested deeper than 128 levels", ""},
		{"fhir unknown type", "application/fhir+json", `{"resourceType":"Patiant"}`, 400, "unknown resourceType 'Patiant'", "resourceType"},
		{"fhir missing type", "application/fhir+json", `{"id":"1"}`, 400, "missing resourceType", "resourceType"},
		{"fhir non-string type", "application/fhir+json", `{"resourceType":7}`, 400, "resourceType must be a string", "resourceType"},
		{"fhir nested type only", "application/fhir+json", `{"meta":{"resourceType":"Patient"}}`, 400, "missing resourceType", "resourceType"},
		{"fhir array", "application/fhir+json", `[{"resourceType":"Patient"}]`, 400, "must be a JSON object, not a array", ""},
		{"fhir empty", "application/fhir+json", ``, 400, "a FHIR resource is required", "resourceType"},
		{"fhir bad json", "application/fhir+json", `{"resourceType":}`, 400, "invalid JSON at line 1", ""},
		{"form repeated key", "application/x-www-form-urlencoded", "b=1&a=1&a=2&b=3", 400, "form field 'a' is repeated", "a"},
		{"form bad escape", "application/x-www-form-urlencoded", "a=%zz", 400, "bad percent-escape", ""},
		{"form semicolon", "application/x-www-form-urlencoded", "a=1;b=2", 400, "invalid form body", ""},
		{"form escape to invalid utf-8", "application/x-www-form-urlencoded", "a=%ff", 400, "UTF-8", ""},
		{"hl7 not starting with MSH", "x-application/hl7-v2+er7", "PID|1\r", 400, "invalid HL7 v2 message", ""},
		{"hl7 empty", "x-application/hl7-v2+er7", "", 400, "invalid HL7 v2 message", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseInput(tc.contentType, []byte(tc.body))
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v (%T), want *InputError", err, err)
			}
			if ie.Status != tc.status {
				t.Errorf("status = %d, want %d (%s)", ie.Status, tc.status, ie.Message)
			}
			if !strings.Contains(ie.Message, tc.message) {
				t.Errorf("message = %q, want it to contain %q", ie.Message, tc.message)
			}
			if ie.Expression != tc.expression {
				t.Errorf("expression = %q, want %q", ie.Expression, tc.expression)
			}
			if ie.Error() != ie.Message {
				t.Errorf("Error() = %q", ie.Error())
			}
		})
	}
}

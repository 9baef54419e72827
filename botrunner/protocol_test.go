package botrunner

import (
	"bytes"
	"net/http"
	"reflect"
	"testing"
	"time"
)

// fullEvent sets every field an Event can carry.
func fullEvent(t *testing.T) Event {
	s, yes, n, d := "s3cret", true, int64(-7), 2.5
	return Event{
		Bot:         Reference{Reference: "Bot/b1", Display: "Echo"},
		ContentType: "x-application/hl7-v2+er7",
		Input:       mustInput(t, MediaHL7, "\x0b"+adtA01+"\x1c\r"),
		Secrets: map[string]Secret{
			"S": {Name: "S", ValueString: &s}, "B": {ValueBoolean: &yes}, "I": {ValueInteger: &n}, "D": {ValueDecimal: &d}, "NONE": {Name: "NONE"},
		},
		TraceID:   "trace-1",
		Requester: &Reference{Reference: "Practitioner/p1", Display: "Dr P"},
		Headers:   map[string]string{"x-a": "1", "x-b": ""},
	}
}

// preparedInput is body left unparsed by PrepareInput, as botapi sends it.
func preparedInput(t *testing.T, contentType, body string) Input {
	t.Helper()
	in, err := PrepareInput(contentType, []byte(body))
	if err != nil || !in.deferred {
		t.Fatalf("PrepareInput(%q) = %+v, %v", contentType, in, err)
	}
	return in
}

func TestFramesRoundTrip(t *testing.T) {
	ev := fullEvent(t)
	tests := []struct {
		name string
		typ  byte
		in   interface{ encode(*encoder) }
		out  interface{ decode(*decoder) error }
	}{
		{"init", frameInit, &initMsg{version: protocolVersion, memory: 256 << 20, maxConsoleBytes: 1, maxResultBytes: 2, maxFrame: 3}, &initMsg{}},
		{"run with an HL7 event", frameRun, &runMsg{id: 1, timeout: time.Second, deadline: time.Minute, digest: "\x00\xffd", filename: "index.ts", code: "exports.x", hasCode: true, hasMedplum: true, runtime: "awslambda", instanceKey: "p\x00b\x00b@1", instanceBot: "p\x00b", event: ev, fhirBaseURL: "https://gw.example.com/fhir/R4/"}, &runMsg{}},
		{"run with JSON and a form", frameRun, &runMsg{id: 2, event: Event{Input: Input{Kind: InputForm, Form: map[string]string{}}}}, &runMsg{}},
		{"run with JSON", frameRun, &runMsg{id: 3, event: jsonEvent(t, `{"a":[1]}`)}, &runMsg{}},
		{"run with an unparsed form", frameRun, &runMsg{id: 3, event: Event{Input: preparedInput(t, MediaForm, "a=1&b=%C3%A9")}}, &runMsg{}},
		{"result of input that does not parse", frameResult, &resultMsg{id: 4, noResult: true, res: Result{Body: []byte{}}, inputErr: &InputError{Status: 400, Message: "m", Expression: "resourceType"}}, &resultMsg{}},
		{"result", frameResult, &resultMsg{id: 4, abandoned: true, res: Result{Outcome: OutcomeTimeout, Body: []byte("{}"), ContentType: ContentTypeFHIR, Message: "m", Console: "c\n", ConsoleTruncated: true, Duration: time.Millisecond}}, &resultMsg{}},
		{"do without a body", frameDo, &doMsg{id: 5, call: 1, method: "GET", path: "Patient", query: "a=1&a=2"}, &doMsg{}},
		{"do with a body", frameDo, &doMsg{id: 5, call: 2, method: "POST", path: "Patient", body: []byte{}, hasBody: true, contentType: "application/fhir+json", header: http.Header{"If-None-Exist": {"identifier=x"}}}, &doMsg{}},
		{"answer", frameAnswer, &answerMsg{id: 5, call: 2, status: 201, contentType: "c", body: []byte("b"), err: ""}, &answerMsg{}},
		{"fetch without a body", frameFetch, &fetchMsg{id: 6, call: 1, req: FetchRequest{Method: "GET", URL: "https://api.example.com/x?y=1", Redirect: "follow"}}, &fetchMsg{}},
		{"fetch with a body", frameFetch, &fetchMsg{id: 6, call: 2, hasBody: true, req: FetchRequest{Method: "POST", URL: "http://h/", Header: http.Header{"X-A": {"1", "2"}}, Body: []byte{}, Redirect: "manual"}}, &fetchMsg{}},
		{"fetched", frameFetched, &fetchedMsg{id: 6, call: 2, resp: FetchResponse{Status: 302, StatusText: "Found", URL: "http://h/", Redirected: true, Header: http.Header{"Location": {"/x"}}, Body: []byte("b")}}, &fetchedMsg{}},
		{"fetch failed", frameFetched, &fetchedMsg{id: 6, call: 3, resp: FetchResponse{Body: []byte{}}, err: "refused"}, &fetchedMsg{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			fw := frameWriter{w: &buf}
			if err := fw.send(tc.typ, tc.in.encode); err != nil {
				t.Fatal(err)
			}
			typ, payload, err := newFrameReader(&buf, 1<<20).next()
			if err != nil || typ != tc.typ {
				t.Fatalf("next = %q, %v", typ, err)
			}
			if err := tc.out.decode(&decoder{b: payload}); err != nil {
				t.Fatal(err)
			}
			if r, ok := tc.out.(*runMsg); ok && r.event.Input.deferred {
				// Bodies travel unparsed (an HL7 message as its text) and are parsed by the
				// worker's runner: parse both sides to compare.
				if err := r.event.Input.parseDeferred(); err != nil {
					t.Fatal(err)
				}
				sent := *tc.in.(*runMsg)
				if err := sent.event.Input.parseDeferred(); err != nil {
					t.Fatal(err)
				}
				tc.in = &sent
			}
			if r, ok := tc.out.(*runMsg); ok && r.event.Input.HL7 != nil {
				// Compare the message by its text: the parsed form holds derived indexes.
				in := tc.in.(*runMsg)
				if r.event.Input.HL7.String() != in.event.Input.HL7.String() {
					t.Errorf("HL7 = %q", r.event.Input.HL7.String())
				}
				copied := *in
				copied.event.Input.HL7 = nil
				r.event.Input.HL7 = nil
				tc.in = &copied
			}
			if !reflect.DeepEqual(tc.in, tc.out) {
				t.Errorf("decoded\n%+v\nsent\n%+v", tc.out, tc.in)
			}
			// Every shorter payload is an error, never a panic or a silent success.
			for n := range len(payload) {
				if err := reflect.New(reflect.TypeOf(tc.out).Elem()).Interface().(interface{ decode(*decoder) error }).decode(&decoder{b: payload[:n]}); err == nil {
					t.Errorf("a payload cut to %d of %d bytes decoded", n, len(payload))
				}
			}
		})
	}
}

func TestFrameReaderRefusesOversizedFrames(t *testing.T) {
	var buf bytes.Buffer
	fw := frameWriter{w: &buf}
	if err := fw.send(frameResult, func(e *encoder) { e.bytes(make([]byte, 100)) }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := newFrameReader(&buf, 64).next(); err == nil {
		t.Error("a frame over the limit was read")
	}
}

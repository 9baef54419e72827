package gateway

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/oauth"
)

// targetCases are paths read against fhir_base /fhir/R4: the gate's
// decision (a token needed or not) and the Target it hands to Operations.
// segs nil means not under the base by the canonical reading.
var targetCases = []struct {
	name, path string
	gated      bool // a request without a token is refused
	segs       []string
	typ, id    string
	op         string
}{
	{name: "instance operation", path: "/fhir/R4/Bot/b1/$execute", gated: true, segs: []string{"Bot", "b1", "$execute"}, typ: "Bot", id: "b1", op: "$execute"},
	{name: "type operation", path: "/fhir/R4/Bot/$execute", gated: true, segs: []string{"Bot", "$execute"}, typ: "Bot", op: "$execute"},
	{name: "system operation", path: "/fhir/R4/$export", gated: true, segs: []string{"$export"}, op: "$export"},
	{name: "base itself", path: "/fhir/R4", gated: true, segs: []string{}},
	{name: "base case", path: "/FHIR/r4/Bot/b1/$execute", gated: true, segs: []string{"Bot", "b1", "$execute"}, typ: "Bot", id: "b1", op: "$execute"},
	{name: "type case is kept", path: "/fhir/R4/bot/b1", gated: true, segs: []string{"bot", "b1"}, typ: "bot", id: "b1"},
	{name: "encoded dollar", path: "/fhir/R4/Bot/b1/%24execute", gated: true, segs: []string{"Bot", "b1", "$execute"}, typ: "Bot", id: "b1", op: "$execute"},
	{name: "encoded letters", path: "/fhir/R4/%42ot/b1", gated: true, segs: []string{"Bot", "b1"}, typ: "Bot", id: "b1"},
	{name: "encoded slash stays in its segment", path: "/fhir/R4/Bot/a%2Fb", gated: true, segs: []string{"Bot", "a/b"}, typ: "Bot", id: "a/b"},
	{name: "encoded slash joining segments", path: "/fhir/R4/Bot%2Fb1%2F%24execute", gated: true, segs: []string{"Bot/b1/$execute"}, typ: "Bot/b1/$execute"},
	{name: "encoded slash in the base", path: "/fhir%2FR4/Bot/b1/$execute", gated: true},
	{name: "double encoding decoded once", path: "/fhir/R4/Bot/b1/%2524execute", gated: true, segs: []string{"Bot", "b1", "%24execute"}, typ: "Bot", id: "b1"},
	{name: "dot-dot back into the base", path: "/fhir/R4/../R4/Bot", gated: true, segs: []string{"Bot"}, typ: "Bot"},
	{name: "dot segment", path: "/fhir/R4/./Bot", gated: true, segs: []string{"Bot"}, typ: "Bot"},
	{name: "encoded dot-dot", path: "/fhir/R4/Bot/%2e%2e/Patient/p1", gated: true, segs: []string{"Patient", "p1"}, typ: "Patient", id: "p1"},
	{name: "dot-dot out of the base", path: "/fhir/R4/../../admin", gated: true},
	{name: "encoded dot-dot out of the base", path: "/fhir/R4/Bot/..%2f..%2fadmin", gated: true, segs: []string{"Bot", "../../admin"}, typ: "Bot", id: "../../admin"},
	{name: "dot-dot into the base", path: "/x/../fhir/R4/Bot", gated: true, segs: []string{"Bot"}, typ: "Bot"},
	{name: "double slashes", path: "//fhir//R4//Bot//b1//$execute", gated: true, segs: []string{"Bot", "b1", "$execute"}, typ: "Bot", id: "b1", op: "$execute"},
	{name: "trailing slash", path: "/fhir/R4/Bot/", gated: true, segs: []string{"Bot"}, typ: "Bot"},
	{name: "trailing slash after an operation", path: "/fhir/R4/Bot/b1/$execute/", gated: true, segs: []string{"Bot", "b1", "$execute"}, typ: "Bot", id: "b1", op: "$execute"},
	{name: "servlet parameter in the base", path: "/fhir;a=1/R4/Bot/b1", gated: true},
	{name: "servlet parameter on the id is kept", path: "/fhir/R4/Bot/b1;x/$execute", gated: true, segs: []string{"Bot", "b1;x", "$execute"}, typ: "Bot", id: "b1;x", op: "$execute"},
	{name: "job status", path: "/fhir/R4/job/j1/status", gated: true, segs: []string{"job", "j1", "status"}, typ: "job", id: "j1"},
	{name: "operation with extra path", path: "/fhir/R4/Bot/b1/$execute/x", gated: true, segs: []string{"Bot", "b1", "$execute", "x"}, typ: "Bot", id: "b1", op: "$execute"},
	{name: "operation at the fourth segment is none", path: "/fhir/R4/Bot/b1/x/$execute", gated: true, segs: []string{"Bot", "b1", "x", "$execute"}, typ: "Bot", id: "b1"},
	{name: "longer base segment", path: "/fhir/R45/Bot", gated: false},
	{name: "outside", path: "/static/x", gated: false},
	{name: "public path", path: "/fhir/R4/metadata", gated: false, segs: []string{"metadata"}, typ: "metadata"},
}

func TestParseTarget(t *testing.T) {
	for _, tt := range targetCases {
		t.Run(tt.name, func(t *testing.T) {
			u, err := url.Parse("http://gw.test" + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			got := ParseTarget("/fhir/R4/", u)
			want := Target{Base: "/fhir/R4", Under: tt.segs != nil, Segments: tt.segs, Type: tt.typ, ID: tt.id, Operation: tt.op}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("ParseTarget(%q)\n got %+v\nwant %+v", tt.path, got, want)
			}
		})
	}
}

// TestGateHandsItsReading checks, for every path of the table, that the
// gate's decision and the Target the operations receive are one reading:
// a request the gate lets through without a token is never one the
// operations are asked about, every request under the base by the Target
// is gated, and what Operations gets is exactly the table's Target.
func TestGateHandsItsReading(t *testing.T) {
	var got *Target
	f := newFixture(t, Options{AllowedOperations: map[string]string{"$export": "r"}, Operations: func(tg Target) Operation {
		got = &tg
		return func(w http.ResponseWriter, r *http.Request, _ *oauth.Identity, _ *Backend) { w.WriteHeader(298) }
	}})
	for _, tt := range targetCases {
		t.Run(tt.name, func(t *testing.T) {
			// Without a token: the gate's decision.
			got = nil
			rec := f.serve(httptest.NewRequest("GET", "http://gw.test"+tt.path, nil))
			if gated := rec.Code == http.StatusUnauthorized; gated != tt.gated {
				t.Fatalf("without a token: status %d, want gated=%v", rec.Code, tt.gated)
			}
			if got != nil {
				t.Fatal("the operations were asked about a request without a token")
			}
			if tt.segs != nil && !tt.gated && !strings.HasSuffix(tt.path, "/metadata") {
				t.Fatal("table error: under the base but not gated")
			}
			// With a token: what the operations receive.
			req := httptest.NewRequest("GET", "http://gw.test"+tt.path, nil)
			req.Header.Set("Authorization", "Bearer "+f.token)
			rec = f.serve(req)
			if tt.segs == nil || !tt.gated {
				if got != nil {
					t.Fatalf("the operations were asked about %+v, not under the base or not gated", *got)
				}
				return
			}
			want := Target{Base: "/fhir/R4", Under: true, Segments: tt.segs, Type: tt.typ, ID: tt.id, Operation: tt.op}
			if got == nil || !reflect.DeepEqual(*got, want) || rec.Code != 298 {
				t.Fatalf("operations got %+v (status %d), want %+v", got, rec.Code, want)
			}
		})
	}
}

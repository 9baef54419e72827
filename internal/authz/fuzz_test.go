package authz

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// widen returns a scope set allowing at least what s allows, made wider
// in the ways mode picks: every permission, the type made "*", granular
// restrictions dropped, patient/ made user/, and an extra scope added.
func widen(s *Set, mode byte) string {
	var out []string
	for _, sc := range s.Scopes {
		w := sc
		if mode&1 != 0 {
			w.Perms = PermAll
		}
		if mode&2 != 0 {
			w.Type = "*"
		}
		if mode&4 != 0 {
			w.Params = nil
		}
		if mode&8 != 0 && w.Context == ContextPatient {
			w.Context = ContextUser
		}
		out = append(out, w.String())
	}
	if mode&16 != 0 {
		out = append(out, "user/Patient.rs", "patient/Observation.cruds")
	}
	return strings.Join(out, " ")
}

var fuzzMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// FuzzDecideMonotone checks that any request allowed by a scope set is
// allowed by every wider one (wider scopes, more scopes, full access), and
// that a set granting nothing allows no request that needs a permission.
func FuzzDecideMonotone(f *testing.F) {
	for _, c := range decideCases {
		m := byte(0)
		for i, x := range fuzzMethods {
			if x == c.method {
				m = byte(i)
			}
		}
		f.Add(c.scope, m, c.url, c.body, byte(31))
	}
	f.Add("patient/Observation.rs?category=laboratory", byte(0), "Observation?patient=p1&category=laboratory", "", byte(4))
	f.Add("user/Observation.s", byte(0), "Observation?subject:Patient.name=x&_include=Observation:patient", "", byte(2))
	a, err := New(Options{FHIRBase: "/fhir/R4", Operations: map[string]string{"$match": "s"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, scope string, method byte, rel, body string, mode byte) {
		set, err := Parse(scope)
		if err != nil || set.Full() {
			return
		}
		req := newFuzzRequest(fuzzMethods[int(method)%len(fuzzMethods)], rel, body)
		if req == nil {
			return
		}
		for _, patient := range []string{"", "p1"} {
			d := a.Decide(a.Access(scope, patient), req)
			wider := []string{widen(set, mode), widen(set, 31), "openid"}
			if d.Denied == nil {
				for _, w := range wider {
					if dw := a.Decide(a.Access(w, patient), req); dw.Denied != nil {
						t.Fatalf("%s %q allowed by %q but refused by the wider %q (patient %q): %s", req.Method, rel, scope, w, patient, dw.Denied.Message)
					}
				}
			}
			// A set granting nothing: patient/ scopes without a patient.
			needs, err := a.classify(req, false)
			if err == nil && len(needs) > 0 {
				if dn := a.Decide(a.Access("openid patient/*.cruds", ""), req); dn.Denied == nil {
					t.Fatalf("%s %q allowed by a scope set granting nothing", req.Method, rel)
				}
			}
		}
	})
}

// newFuzzRequest builds a Request as the gateway would, or nil when rel
// is not a URL.
func newFuzzRequest(method, rel, body string) *Request {
	path, query, _ := strings.Cut(rel, "?")
	var segs []string
	for s := range strings.SplitSeq(path, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil
	}
	r := &Request{Method: method, Segments: segs, Query: q, Header: http.Header{}}
	if body != "" {
		r.Body = []byte(body)
	}
	return r
}

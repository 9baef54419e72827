package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
	"github.com/fhirgate/fhirgate/internal/tokens"
	"github.com/fhirgate/fhirgate/internal/userinfo"
)

// newGateForFuzz is a Gateway with the default base and public paths over
// a real OAuth server. Requests without a token never reach the store, so
// one gateway serves every input of a fuzzing process.
func newGateForFuzz(tb testing.TB) *Gateway {
	tb.Helper()
	st := storetest.Open(tb)
	tok, err := tokens.New(context.Background(), tokens.Options{Issuer: "https://gw.test", Keys: oauth.KeyStore{Store: st}})
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := oauth.New(oauth.Options{Store: st, Tokens: tok, UserInfo: userinfo.New(userinfo.Options{DefaultTimeout: time.Second})})
	if err != nil {
		tb.Fatal(err)
	}
	gw, err := New(Options{OAuth: srv})
	if err != nil {
		tb.Fatal(err)
	}
	return gw
}

// The oracle below is written independently of paths.go: its own percent
// decoder and RFC 3986 dot-segment removal, and the normalisation steps in
// several orders, because a backend may apply them in any order.

// unescapeOnce decodes every valid %XX; ok is false if any escape is
// malformed (strict decoding, as net/url and most servers do it).
func unescapeOnce(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", false
		}
		b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
		i += 2
	}
	return b.String(), true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// removeDots resolves "." and ".." segments and collapses empty ones.
func removeDots(p string) string {
	var out []string
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
		}
	}
	return "/" + strings.Join(out, "/")
}

func stripParams(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if j := strings.IndexByte(s, ';'); j >= 0 {
			segs[i] = s[:j]
		}
	}
	return strings.Join(segs, "/")
}

func slashes(p string) string { return strings.ReplaceAll(p, `\`, "/") }

// readings are the fully normalised ways a backend may read an escaped
// path: decoded 0 to 3 times, with backslashes as separators, ;params
// dropped and dot segments resolved, in three orders, and case-folded.
func readings(escaped string) []string {
	var out []string
	decoded := []string{escaped}
	for cur := escaped; len(decoded) < 4; {
		next, ok := unescapeOnce(cur)
		if !ok || next == cur {
			break
		}
		decoded = append(decoded, next)
		cur = next
	}
	paramsFirst := stripParams(escaped)
	cleanedFirst := removeDots(stripParams(slashes(escaped)))
	for _, d := range decoded {
		out = append(out, strings.ToLower(removeDots(stripParams(slashes(d)))))
	}
	for cur, n := paramsFirst, 0; n < 4; n++ {
		out = append(out, strings.ToLower(removeDots(slashes(cur))))
		next, ok := unescapeOnce(cur)
		if !ok || next == cur {
			break
		}
		cur = next
	}
	for cur, n := cleanedFirst, 0; n < 4; n++ {
		out = append(out, strings.ToLower(cur))
		next, ok := unescapeOnce(cur)
		if !ok || next == cur {
			break
		}
		cur = next
	}
	return out
}

// protectedReading returns a reading under /fhir/r4 that is not one of the
// default public paths, if there is one. Readings left with dot segments
// (decoding after resolving them can create new ones) are not fully
// normalised: TestGateProtectsLiteralReadings covers that class.
func protectedReading(escaped string) (string, bool) {
	for _, r := range readings(escaped) {
		if r != "/fhir/r4" && !strings.HasPrefix(r, "/fhir/r4/") || hasDotSegment(r) {
			continue
		}
		switch strings.TrimPrefix(r, "/fhir/r4") {
		case "/metadata", "/.well-known/smart-configuration":
			continue
		}
		return r, true
	}
	return "", false
}

func hasDotSegment(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// FuzzGatePaths is a property test of the gate's path normalisation: for
// any request path, if any fully normalised reading of it (percent-decoded
// up to three times, backslashes, ;params, dot segments, case, in any
// order) is under /fhir/R4 and not a public path, a request without a token
// must be refused with 401 and must not reach the next handler. Seeds:
// testdata/fuzz/FuzzGatePaths and below.
func FuzzGatePaths(f *testing.F) {
	gw := newGateForFuzz(f)
	for _, p := range []string{
		"/fhir/R4/Patient/1",
		"/fhir/R4/Bot/..%2f..%2fadmin",
		"/x/../fhir/R4/Patient",
		"/fhir;a/R4/Patient",
		"/fhir/R4/Patient%00",
		"/x/%2e%2e/fhir/R4/Patient",
		"/x/%252e%252e/fhir/R4/Patient",
		"/%25252566hir/R4/Patient",
		`/x\..\fhir\R4\Patient`,
		"/x%5c..%5cfhir%5cR4%5cPatient",
		"/FHIR/R4/PATIENT",
		"//fhir//R4//Patient",
		"/fhir/R4/metadata",
		"/fhir/R4/metadata/../Patient",
		"/fhir/R4/metadata;x",
		"/fhir/R4/metadata%2f..%2fPatient",
		"/fhir/R4%3b/Patient",
		"/fhir/R4/Patient/$execute",
		"/oauth2/token",
		"/auth/me",
		"/other",
		"/fhir/R45",
		"/fhir/R4/.well-known/smart-configuration/../../Patient",
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, target string) {
		if !strings.HasPrefix(target, "/") || strings.ContainsAny(target, " ?#") {
			return // not an origin-form path; the query is not part of it
		}
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return // net/http refuses the request line with 400
		}
		reading, protected := protectedReading(u.EscapedPath())
		req := &http.Request{Method: "GET", URL: u, RequestURI: target, Header: http.Header{}, Host: "gw.test"}
		req = req.WithContext(context.Background())
		rec := httptest.NewRecorder()
		reached := false
		err = gw.Serve(rec, req, func(w http.ResponseWriter, r *http.Request) error {
			reached = true
			w.WriteHeader(299)
			return nil
		})
		if err != nil {
			t.Fatalf("Serve(%q): %v", target, err)
		}
		if protected && (reached || rec.Code != http.StatusUnauthorized) {
			t.Fatalf("%q reads as %q under the FHIR base, yet without a token it got %d (reached the backend: %v)",
				target, reading, rec.Code, reached)
		}
	})
}

// TestGateProtectsLiteralReadings covers readings FuzzGatePaths leaves out:
// the path as sent, or with only some of the normalisations applied, which
// is how most backends (Go, Node, .NET, anything that keeps ;params or does
// not resolve dot segments) read it. Each of these is under the FHIR base for
// such a backend, yet the gate passes it on without a token.
func TestGateProtectsLiteralReadings(t *testing.T) {
	gw := newGateForFuzz(t)
	for _, tc := range []struct{ path, why string }{
		{"/fhir/R4/../../admin", "the literal path is under /fhir/R4 but both gate views resolve the dots to /admin, " +
			"so it reaches the backend unauthenticated as /fhir/R4/../../admin"},
		{"/fhir/R4/..;/..;/admin", "cleanPath drops ;params before resolving dots, so both views read /admin; a backend " +
			"that keeps ;params reads /fhir/R4/..;/..;/admin, under the base"},
		{"/fhir/R4/Patient/..;/metadata", "both views strip ;params and read the public /fhir/r4/metadata, so it is served " +
			"without a token; a backend that keeps ;params reads Patient/..;/metadata, which is not public"},
		{"/fhir/R4%2f..%2f..%2fadmin", "the decoded view resolves the dots to /admin and the escaped view is /fhir/r4%2f..%2f..%2fadmin; " +
			"a backend that decodes %2F after routing on dot segments reads /fhir/R4/../../admin, under the base"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			u, err := url.ParseRequestURI(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			reached := false
			if err := gw.Serve(rec, &http.Request{Method: "GET", URL: u, Header: http.Header{}}, func(w http.ResponseWriter, r *http.Request) error {
				reached = true
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if reached || rec.Code != http.StatusUnauthorized {
				t.Fatalf("without a token: %d, reached the backend: %v", rec.Code, reached)
			}
		})
	}
}

// TestGatePathOracleIsNotVacuous checks the property test's oracle on paths
// whose answer is known, so FuzzGatePaths cannot pass by never finding a
// protected reading.
func TestGatePathOracleIsNotVacuous(t *testing.T) {
	for _, tc := range []struct {
		path      string
		protected bool
	}{
		{"/fhir/R4/Patient/1", true},
		{"/x/../fhir/R4/Patient", true},
		{"/x/%252e%252e/fhir/R4/Patient", true},
		{"/fhir;a/R4/Patient", true},
		{"/FHIR/R4/Patient", true},
		{"/x/..%5cfhir%5cR4", true},
		{"/fhir/R4/metadata", false},
		{"/fhir/R45/Patient", false},
		{"/other", false},
	} {
		u, err := url.ParseRequestURI(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if _, got := protectedReading(u.EscapedPath()); got != tc.protected {
			t.Errorf("protectedReading(%q) = %v, want %v", tc.path, got, tc.protected)
		}
	}
}

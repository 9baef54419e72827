package gateway

import (
	"net/http"
	"net/url"
	"strings"
)

// overrideHeaders make some frameworks and servers act on another path or
// method than the request line's (IIS and Symfony read X-Original-URL and
// X-Rewrite-URL; Express's method-override, Laravel, Spring's filters and
// many APIs read the method ones). The gate judges the request line, so a
// backend honouring one of these would serve something the gate never
// judged: they are removed from every request before it goes on.
var overrideHeaders = []string{
	"X-Original-URL",
	"X-Rewrite-URL",
	"X-HTTP-Method-Override",
	"X-HTTP-Method",
	"X-Method-Override",
}

// methodOverrideRefused answers a request under the FHIR base whose query
// carries _method.
const methodOverrideRefused = "the _method query parameter is not accepted: send the request with the method it names"

// headerSet is a set of header names matched case-insensitively with '_'
// and '-' taken as the same character: CGI, PHP, WSGI and Rack turn both
// X-Original-URL and X_Original_URL into HTTP_X_ORIGINAL_URL, and Go keeps
// the underscore spelling as a separate, non-canonical key that Header.Del
// would miss.
type headerSet struct {
	names []string
	// lens has bit n set when a name is n bytes long (n < 64), so most of a
	// request's headers are passed over on their length alone; a name of 64
	// bytes or more sets bit 63 and is always compared.
	lens uint64
}

func newHeaderSet(names ...string) headerSet {
	s := headerSet{names: names}
	for _, n := range names {
		s.lens |= 1 << min(len(n), 63)
	}
	return s
}

// strip deletes from h every header in the set.
func (s headerSet) strip(h http.Header) {
	for key := range h {
		if s.lens&(1<<min(len(key), 63)) == 0 {
			continue
		}
		for _, name := range s.names {
			if sameHeaderName(key, name) {
				delete(h, key)
				break
			}
		}
	}
}

// sameHeaderName compares header names ignoring ASCII case, with '_' and
// '-' equal.
func sameHeaderName(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := foldHeaderByte(a[i]), foldHeaderByte(b[i])
		if x != y {
			return false
		}
	}
	return true
}

func foldHeaderByte(c byte) byte {
	switch {
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	case c == '_':
		return '-'
	}
	return c
}

// hasMethodOverride tells whether a raw query carries a _method parameter,
// the query form of a method override (Rails, Laravel, Express's
// method-override). Such a request is refused rather than forwarded with
// the parameter removed: silently altering the query would make the
// backend answer a request the client did not send, and a client that
// relies on _method is better told at once that it does not work here.
//
// Keys are read as a lenient backend would: split on '&' and ';',
// percent-decoded (repeatedly, so %255F is caught), case-insensitively, and
// with a leading ' ', '.' or '[' taken as '_' (PHP turns those into '_' in
// parameter names).
func hasMethodOverride(rawQuery string) bool {
	if !strings.ContainsAny(rawQuery, "%+") && !containsFoldMethod(rawQuery) {
		return false
	}
	for rawQuery != "" {
		var pair string
		if i := strings.IndexAny(rawQuery, "&;"); i >= 0 {
			pair, rawQuery = rawQuery[:i], rawQuery[i+1:]
		} else {
			pair, rawQuery = rawQuery, ""
		}
		key, _, _ := strings.Cut(pair, "=")
		if len(key) < len("_method") {
			continue
		}
		if strings.ContainsAny(key, "%+") {
			key = decodeQueryKey(key)
		}
		if isMethodKey(key) {
			return true
		}
	}
	return false
}

// containsFoldMethod tells whether s contains "method" in any case, without
// allocating.
func containsFoldMethod(s string) bool {
	for i := 0; i+len("method") <= len(s); i++ {
		if (s[i] == 'm' || s[i] == 'M') && strings.EqualFold(s[i:i+len("method")], "method") {
			return true
		}
	}
	return false
}

// decodeQueryKey query-decodes k repeatedly (up to three times).
func decodeQueryKey(k string) string {
	for range 3 {
		dec, err := url.QueryUnescape(k)
		if err != nil || dec == k {
			break
		}
		k = dec
	}
	return k
}

func isMethodKey(k string) bool {
	if len(k) != len("_method") {
		return false
	}
	switch k[0] {
	case '_', ' ', '.', '[':
	default:
		return false
	}
	return strings.EqualFold(k[1:], "method")
}

// isMethodToken tells whether m is an HTTP method name (an RFC 9110 token)
// in upper case. Methods are case-sensitive, and a request is matched to
// the list exactly, so a lower-case entry would never match a GET.
func isMethodToken(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		switch {
		case 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

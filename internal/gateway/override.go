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

// stripHeaders deletes from h every header whose name matches one of names
// case-insensitively with '_' and '-' taken as the same character: CGI,
// PHP, WSGI and Rack turn both X-Original-URL and X_Original_URL into
// HTTP_X_ORIGINAL_URL, and Go keeps the underscore spelling as a separate,
// non-canonical key that Header.Del would miss.
func stripHeaders(h http.Header, names []string) {
	for key := range h {
		for _, name := range names {
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

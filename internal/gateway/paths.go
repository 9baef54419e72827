package gateway

import (
	"net/url"
	"path"
	"strings"
)

// normalizePath returns the path a lenient backend might act on after
// decoding: percent-decoded (repeatedly, so %252e is caught too), then as
// cleanPath.
func normalizePath(p string) string {
	for range 3 {
		dec, err := url.PathUnescape(p)
		if err != nil || dec == p {
			break
		}
		p = dec
	}
	return cleanPath(p)
}

// pathViews returns the ways a backend might read a request's path: fully
// decoded, and as sent with percent-escapes left alone (a backend that
// does not decode %2F sees /fhir/R4/Bot/..%2f..%2fadmin as a Bot path,
// while decoding turns it into /fhir/admin).
func pathViews(u *url.URL) [2]string {
	return [2]string{normalizePath(u.EscapedPath()), cleanPath(u.EscapedPath())}
}

// cleanPath strips ;parameters from each segment (servlet containers ignore
// them), turns backslashes into slashes, resolves dot segments, and
// lower-cases.
func cleanPath(p string) string {
	p = strings.ReplaceAll(p, "\\", "/")
	if strings.Contains(p, ";") {
		segs := strings.Split(p, "/")
		for i, s := range segs {
			if j := strings.IndexByte(s, ';'); j >= 0 {
				segs[i] = s[:j]
			}
		}
		p = strings.Join(segs, "/")
	}
	p = path.Clean("/" + p)
	return strings.ToLower(p)
}

// under tells whether the normalised path p is base or below it.
func under(p, base string) bool {
	return p == base || strings.HasPrefix(p, base+"/")
}

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
	return cleanPath(decodePath(p))
}

// decodePath percent-decodes p repeatedly (up to three times).
func decodePath(p string) string {
	for range 3 {
		dec, err := url.PathUnescape(p)
		if err != nil || dec == p {
			break
		}
		p = dec
	}
	return p
}

// pathViews returns the ways a backend might read a request's path, all
// lower-cased: as sent; decoded; and each of those with dot segments,
// ;params, duplicate slashes and backslashes resolved. Backends differ in
// which of these steps they take: one that does not decode %2F sees
// /fhir/R4/Bot/..%2f..%2fadmin as a Bot path, which decoding turns into
// /fhir/admin; one that does not resolve dot segments or ;params serves
// /fhir/R4/../../admin or /fhir/R4/..;/..;/admin under /fhir/R4.
func pathViews(u *url.URL) [4]string {
	raw := u.EscapedPath()
	decoded := decodePath(raw)
	return [4]string{
		strings.ToLower(raw),
		strings.ToLower(decoded),
		cleanPath(raw),
		cleanPath(decoded),
	}
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

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

// Target is the gate's one reading of a request's path: the reading
// fhirgate's own operations route on. The gate computes it once per request
// and hands it to Options.Operations, so nothing after the gate reads the
// path again.
//
// The path is split at '/' as sent; each segment is percent-decoded once
// (so %24execute is $execute, and a%2Fb is the one segment "a/b", never
// two); then empty segments (double and trailing slashes) are dropped and
// dot segments resolved ("." and "..", also when they were sent encoded).
// The result is under fhir_base when it starts with fhir_base's segments,
// compared case-insensitively, as the gate compares them. ";parameters"
// are kept: a segment "R4;x" is not "R4", and "b1;x" is not the id "b1"
// (the gate still gates such a path, which a servlet backend would read
// without them; the operations do not answer it). Type, ID and Operation
// read the segments below fhir_base the FHIR way; they are case-sensitive,
// as FHIR names are.
type Target struct {
	// Base is the configured fhir_base, cleaned (no trailing slash), for
	// building URLs.
	Base string
	// Under tells whether the path is fhir_base or below it.
	Under bool
	// Segments are the decoded segments below fhir_base (empty at the base
	// itself, nil when not Under).
	Segments []string
	// Type is the first segment ("Bot", "Patient", "job"), unless it is an
	// operation.
	Type string
	// ID is the second segment unless it is an operation.
	ID string
	// Operation is the segment that names an operation ("$execute") at the
	// system, type or instance level: {base}/$op, {base}/Type/$op or
	// {base}/Type/id/$op. Segments may follow it; whether an operation
	// takes them is its own business (Medplum's $execute does).
	Operation string
}

// ParseTarget reads u's path against fhirBase (e.g. /fhir/R4) as described
// on Target. The Gateway calls it for every request; it is exported for
// tests of the operations it routes to.
func ParseTarget(fhirBase string, u *url.URL) Target {
	t := Target{Base: path.Clean("/" + fhirBase)}
	base := canonicalSegments(t.Base)
	segs := canonicalSegments(u.EscapedPath())
	if len(segs) < len(base) {
		return t
	}
	for i, b := range base {
		if !strings.EqualFold(segs[i], b) {
			return t
		}
	}
	rel := segs[len(base):]
	t.Under, t.Segments = true, rel
	isOp := func(s string) bool { return strings.HasPrefix(s, "$") }
	switch {
	case len(rel) == 0:
	case isOp(rel[0]):
		t.Operation = rel[0]
	default:
		t.Type = rel[0]
		switch {
		case len(rel) >= 2 && isOp(rel[1]):
			t.Operation = rel[1]
		case len(rel) >= 2:
			t.ID = rel[1]
			if len(rel) >= 3 && isOp(rel[2]) {
				t.Operation = rel[2]
			}
		}
	}
	return t
}

// canonicalSegments splits an escaped path as Target describes.
func canonicalSegments(escaped string) []string {
	out := []string{}
	for raw := range strings.SplitSeq(escaped, "/") {
		seg, err := url.PathUnescape(raw)
		if err != nil {
			seg = raw // net/http refuses invalid escapes before a handler sees them
		}
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
	return out
}

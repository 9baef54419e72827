package fhir

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// maxPathDecodes bounds how many times CheckBotPath percent-decodes a
// segment. A real FHIR path needs one decode at most; a segment still
// changing after this many is refused rather than decoded further (each
// round is linear in the segment, so an unbounded loop over %252525… would
// be quadratic).
const maxPathDecodes = 8

// CheckBotPath refuses a FHIR path a bot asked for that could leave the
// resource it names at some backend. path is relative to the FHIR base and
// escaped, without a query ("Patient/123", "Observation/$validate", "" for
// a batch).
//
// Each segment is percent-decoded repeatedly until it stops changing, as a
// backend (or a chain of proxies) that decodes more than once would. The
// path is refused if, at any of those decodings, a segment holds '/' or
// '\' (a new separator), a control character or NUL, or is a dot segment:
// only '.' characters and spaces once any ";params" are cut off, which
// catches "..", "..;" (servlet containers) and ".. " or "..." (Windows
// trims trailing dots and spaces). An absolute path, an invalid escape at
// any depth, or a segment still changing after maxPathDecodes decodings is
// refused too: none of these is a FHIR path, and each could be read as one
// by a lenient decoder.
func CheckBotPath(path string) error {
	if strings.HasPrefix(path, "/") {
		return pathError(path, "is absolute")
	}
	if i := strings.IndexAny(path, "\\?# "); i >= 0 {
		return pathError(path, fmt.Sprintf("holds %q", path[i]))
	}
	for seg := range strings.SplitSeq(path, "/") {
		if err := checkSegment(seg); err != nil {
			return pathError(path, err.Error())
		}
	}
	return nil
}

// checkSegment applies CheckBotPath's rules to one raw segment.
func checkSegment(seg string) error {
	for round := 0; ; round++ {
		if hasControl(seg) {
			return errors.New("holds a control character")
		}
		if round > 0 && strings.ContainsAny(seg, "/\\") {
			return errors.New("has a segment that decodes to a '/' or '\\'")
		}
		if isDotSegment(seg) {
			return errors.New("has a '.' or '..' segment")
		}
		if !strings.Contains(seg, "%") {
			return nil
		}
		if round == maxPathDecodes {
			return errors.New("has a segment that is percent-encoded too many times")
		}
		dec, err := url.PathUnescape(seg)
		if err != nil {
			return errors.New("has an invalid percent-encoding")
		}
		seg = dec
	}
}

// isDotSegment tells whether seg, without its ";params", is made only of
// '.' and ' ' and has at least one '.'.
func isDotSegment(seg string) bool {
	if i := strings.IndexByte(seg, ';'); i >= 0 {
		seg = seg[:i]
	}
	return strings.Contains(seg, ".") && strings.Trim(seg, ". ") == ""
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

func pathError(path, reason string) error {
	if len(path) > 100 {
		path = path[:100] + "…"
	}
	printable := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(path, "\uFFFD"))
	return fmt.Errorf("invalid FHIR path '%s': it %s", printable, reason)
}

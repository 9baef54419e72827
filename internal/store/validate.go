package store

import (
	"encoding/base64"
	"fmt"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fhirgate/fhirgate/internal/authz"
)

var lifetimePattern = regexp.MustCompile(`^(\d+)([smhdwy])$`)

// ValidID reports whether id has FHIR id syntax: [A-Za-z0-9\-.]{1,64}.
// It and validTypeName are loops rather than regular expressions because every
// store read and write runs them, some several times (an AuditEvent's
// references): as regexps they were a fifth of the CPU of encoding one.
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !isASCIILetter(c) && (c < '0' || c > '9') && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// validTypeName reports whether t looks like a FHIR resource type name:
// [A-Z][A-Za-z]{0,63}.
func validTypeName(t string) bool {
	if len(t) == 0 || len(t) > 64 || t[0] < 'A' || t[0] > 'Z' {
		return false
	}
	for i := 1; i < len(t); i++ {
		if !isASCIILetter(t[i]) {
			return false
		}
	}
	return true
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// ParseReference splits a "<ResourceType>/<id>" reference.
func ParseReference(ref string) (resourceType, id string, err error) {
	t, i, ok := strings.Cut(ref, "/")
	if !ok || !validTypeName(t) || !ValidID(i) {
		return "", "", fmt.Errorf("reference %q is not of the form ResourceType/id", ref)
	}
	return t, i, nil
}

// ParseLifetime parses a Medplum token lifetime: digits followed by one of
// s, m, h, d (24h), w (7d) or y (365d), e.g. "1h", "30d", "2w".
func ParseLifetime(s string) (time.Duration, error) {
	m := lifetimePattern.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("lifetime %q is not a number followed by s, m, h, d, w or y", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("lifetime %q: %w", s, err)
	}
	unit := map[string]time.Duration{
		"s": time.Second, "m": time.Minute, "h": time.Hour,
		"d": 24 * time.Hour, "w": 7 * 24 * time.Hour, "y": 365 * 24 * time.Hour,
	}[m[2]]
	if n > int64(1<<63-1)/int64(unit) {
		return 0, fmt.Errorf("lifetime %q is too long", s)
	}
	return time.Duration(n) * unit, nil
}

// checkReference validates a required reference, optionally restricted to
// some resource types, and returns its parts.
func checkReference(field string, ref string, allowed ...string) (string, string, error) {
	if ref == "" {
		return "", "", invalid(field, "is required")
	}
	t, id, err := ParseReference(ref)
	if err != nil {
		return "", "", invalid(field, err.Error())
	}
	if len(allowed) > 0 && !slices.Contains(allowed, t) {
		return "", "", invalid(field, fmt.Sprintf("must reference one of %s, not %s", strings.Join(allowed, ", "), t))
	}
	return t, id, nil
}

// checkOptionalReference validates ref when it is set.
func checkOptionalReference(field string, ref *Reference, allowed ...string) error {
	if ref == nil {
		return nil
	}
	_, _, err := checkReference(field+".reference", ref.Reference, allowed...)
	return err
}

// MaxIndexedLength bounds strings the store indexes (emails, external ids,
// identifier systems and values): an index key must stay far below
// Badger's 65,000-byte key limit, and no real identifier comes close.
const MaxIndexedLength = 1024

// checkIndexable refuses an indexed string longer than MaxIndexedLength.
func checkIndexable(field, v string) error {
	if len(v) > MaxIndexedLength {
		return invalid(field, fmt.Sprintf("is %d bytes long; at most %d are allowed", len(v), MaxIndexedLength))
	}
	return nil
}

func checkRequired(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return invalid(field, "is required")
	}
	return nil
}

func checkProjectID(field, id string, required bool) error {
	if id == "" {
		if required {
			return invalid(field, "is required")
		}
		return nil
	}
	if !ValidID(id) {
		return invalid(field, fmt.Sprintf("%q is not a valid id", id))
	}
	return nil
}

func checkEnum(field, v string, allowed ...string) error {
	if !slices.Contains(allowed, v) {
		return invalid(field, fmt.Sprintf("%q is not one of %s", v, strings.Join(allowed, ", ")))
	}
	return nil
}

func checkHTTPURL(field, s string) error {
	if s == "" {
		return invalid(field, "is required")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid(field, fmt.Sprintf("%q is not an absolute http or https URL", s))
	}
	return nil
}

func checkLifetime(field, s string) error {
	if s == "" {
		return nil
	}
	if _, err := ParseLifetime(s); err != nil {
		return invalid(field, err.Error())
	}
	return nil
}

func checkGoDuration(field, s string, allowZero bool) error {
	if s == "" {
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return invalid(field, fmt.Sprintf("%q is not a duration like 5s or 1m30s", s))
	}
	if d < 0 || (d == 0 && !allowZero) {
		return invalid(field, fmt.Sprintf("%q must be positive", s))
	}
	return nil
}

func checkTime(field, s string) error {
	if s == "" {
		return nil
	}
	if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
		return invalid(field, fmt.Sprintf("%q is not an RFC 3339 time", s))
	}
	return nil
}

func checkSettings(field string, settings []ProjectSetting) error {
	for i, s := range settings {
		if err := checkRequired(fmt.Sprintf("%s[%d].name", field, i), s.Name); err != nil {
			return err
		}
	}
	return nil
}

func checkBase64(field, s string) error {
	if _, err := base64.StdEncoding.DecodeString(s); err != nil {
		return invalid(field, "is not valid base64")
	}
	return nil
}

func validEmail(s string) bool {
	if s == "" || strings.TrimSpace(s) != s {
		return false
	}
	a, err := mail.ParseAddress(s)
	return err == nil && a.Name == "" && a.Address == s
}

// checkScope checks a client's allowed scope: RFC 6749 §3.3 scope-tokens
// separated by single spaces, each SMART or OpenID syntax (internal/authz).
func checkScope(field, s string) error {
	if s == "" {
		return nil
	}
	for tok := range strings.SplitSeq(s, " ") {
		if tok == "" {
			return invalid(field, "scope tokens are separated by single spaces")
		}
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
				return invalid(field, fmt.Sprintf("scope token %q contains a character RFC 6749 does not allow", tok))
			}
		}
	}
	if _, err := authz.Parse(s); err != nil {
		return invalid(field, err.Error())
	}
	return nil
}

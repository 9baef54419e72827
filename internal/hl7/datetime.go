package hl7

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseDateTime parses an HL7 date/time (DTM, or the first component of a
// TS): YYYY[MM[DD[HH[MM[SS[.S[S[S[S]]]]]]]]][+/-ZZZZ]. Missing parts default
// to the start of the period, as in Medplum's parseHl7DateTime. Without an
// offset in s, the time is in loc (UTC when loc is nil); Medplum's tzOffset
// option is loc = time.FixedZone(…).
//
// Unlike Medplum, the fraction is a decimal fraction of a second (".1" is
// 100 ms, ".1234" is 123.4 ms; Medplum reads the digits as a count of
// milliseconds), and malformed input is an error rather than a guess.
func ParseDateTime(s string, loc *time.Location) (time.Time, error) {
	if loc == nil {
		loc = time.UTC
	}
	body := s
	if i := indexOffset(s); i >= 0 {
		z, err := ParseOffset(s[i:])
		if err != nil {
			return time.Time{}, fmt.Errorf("parsing HL7 date/time %q: %w", s, err)
		}
		loc = z
		body = s[:i]
	}
	frac := ""
	if i := strings.IndexByte(body, '.'); i >= 0 {
		frac = body[i+1:]
		body = body[:i]
		if len(body) != 14 || len(frac) < 1 || len(frac) > 4 || !digits(frac) {
			return time.Time{}, fmt.Errorf("parsing HL7 date/time %q: a fraction needs YYYYMMDDHHMMSS and 1-4 digits", s)
		}
	}
	if len(body) < 4 || len(body) > 14 || len(body)%2 != 0 || !digits(body) {
		return time.Time{}, fmt.Errorf("parsing HL7 date/time %q: want YYYY[MM[DD[HH[MM[SS[.SSSS]]]]]][+/-ZZZZ]", s)
	}
	part := func(i, def int) int {
		if len(body) < i+2 {
			return def
		}
		v, _ := strconv.Atoi(body[i : i+2])
		return v
	}
	year, _ := strconv.Atoi(body[:4])
	month, day, hour, minute, sec := part(4, 1), part(6, 1), part(8, 0), part(10, 0), part(12, 0)
	nsec := 0
	if frac != "" {
		v, _ := strconv.Atoi(frac)
		for n := len(frac); n < 9; n++ {
			v *= 10
		}
		nsec = v
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, loc)
	if month < 1 || month > 12 || day < 1 || t.Day() != day || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, fmt.Errorf("parsing HL7 date/time %q: out of range", s)
	}
	return t, nil
}

// ParseOffset parses a UTC offset written +HHMM, -HHMM, +HH or +HH:MM into a
// fixed zone.
func ParseOffset(s string) (*time.Location, error) {
	if len(s) < 3 || (s[0] != '+' && s[0] != '-') {
		return nil, fmt.Errorf("invalid UTC offset %q: want +HHMM or -HHMM", s)
	}
	v := s[1:]
	if len(v) == 5 && v[2] == ':' {
		v = v[:2] + v[3:]
	}
	if (len(v) != 2 && len(v) != 4) || !digits(v) {
		return nil, fmt.Errorf("invalid UTC offset %q: want +HHMM or -HHMM", s)
	}
	h, _ := strconv.Atoi(v[:2])
	mins := 0
	if len(v) == 4 {
		mins, _ = strconv.Atoi(v[2:])
	}
	if h > 23 || mins > 59 {
		return nil, fmt.Errorf("invalid UTC offset %q: out of range", s)
	}
	secs := (h*60 + mins) * 60
	if s[0] == '-' {
		secs = -secs
	}
	return time.FixedZone(s, secs), nil
}

// FormatDateTime formats t in UTC as YYYYMMDDHHMMSS, followed by .mmm when
// the milliseconds are not zero, with no zone, as Medplum's
// formatHl7DateTime does (but Medplum does not zero-pad the milliseconds:
// it writes 5 ms as ".5").
func FormatDateTime(t time.Time) string {
	t = t.UTC()
	b := make([]byte, 0, 18)
	b = t.AppendFormat(b, "20060102150405")
	if ms := t.Nanosecond() / 1e6; ms > 0 {
		b = append(b, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	}
	return string(b)
}

func indexOffset(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '+' || s[i] == '-' {
			return i
		}
	}
	return -1
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

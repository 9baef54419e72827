package hl7

import (
	"iter"
	"strings"
)

// Whole, as a subcomponent index, selects the whole component (Medplum:
// leaving the subcomponent argument undefined).
const Whole = -1

// Field is the value of one field. It is a small value that refers to the
// message text; a Field returned by Segment.Field is tied to its position, so
// SetComponent writes through to the message.
type Field struct {
	raw     string
	d       Delimiters
	m       *Message // nil for detached fields
	seg     int32
	idx     int32 // index in the split segment text
	literal bool  // MSH-1 or MSH-2: never split or decoded
	noEsc   bool  // the segment has no escape character: skip decoding
	exists  bool
}

// ParseField returns a detached field holding wire text raw in delimiters d
// (Medplum: Hl7Field.parse).
func ParseField(raw string, d Delimiters) Field {
	return Field{raw: raw, d: d, exists: true}
}

// String returns the field's wire text: repetitions, components and escape
// sequences as they are in the message (Medplum: field.toString()).
func (f Field) String() string { return f.raw }

// Exists reports whether the segment has this field (even if empty).
func (f Field) Exists() bool { return f.exists }

// IsEmpty reports whether the field has no text.
func (f Field) IsEmpty() bool { return f.raw == "" }

// Repetitions returns the number of repetitions; an empty field has one
// empty repetition, as in Medplum's field.components.length.
func (f Field) Repetitions() int {
	if f.literal {
		return 1
	}
	return count(f.raw, f.d.Repetition) + 1
}

// Repetition returns repetition r (0-based) as a detached field, or an
// empty field that does not exist when r is out of range.
func (f Field) Repetition(r int) Field {
	if f.literal {
		if r == 0 {
			return Field{raw: f.raw, d: f.d, literal: true, exists: true}
		}
		return Field{d: f.d}
	}
	rep, ok := nth(f.raw, f.d.Repetition, r)
	if !ok {
		return Field{d: f.d}
	}
	return Field{raw: rep, d: f.d, exists: true}
}

// NumComponents returns the number of components in repetition r (0 when r
// is out of range).
func (f Field) NumComponents(r int) int {
	if f.literal {
		if r == 0 {
			return 1
		}
		return 0
	}
	rep, ok := nth(f.raw, f.d.Repetition, r)
	if !ok {
		return 0
	}
	return count(rep, f.d.Component) + 1
}

// Component returns a decoded component value, with Medplum's indexes:
// component is 1-based (MSH-9.2 is Component(2, …)), subcomponent is
// 0-based or Whole, repetition is 0-based. Anything out of range reads as ""
// (Medplum throws for a missing repetition).
func (f Field) Component(component, subcomponent, repetition int) string {
	if component < 1 {
		return ""
	}
	var v string
	if f.literal {
		// Medplum models MSH-1 and MSH-2 as one component holding the text.
		if component != 1 || repetition != 0 {
			return ""
		}
		v = f.raw
		if subcomponent >= 0 {
			v, _ = nth(v, f.d.Subcomponent, subcomponent)
		}
		return v
	}
	v = f.locate(repetition, component-1)
	if subcomponent >= 0 {
		v, _ = nth(v, f.d.Subcomponent, subcomponent)
	}
	return f.decode(v)
}

func (f Field) decode(v string) string {
	if f.noEsc {
		return v
	}
	return f.d.Decode(v)
}

// Components yields the decoded components of repetition r (0-based)
// with their 1-based numbers, in one pass over the field. Reading a whole
// field this way is linear; calling Component for each index rescans the
// field's start every time.
func (f Field) Components(r int) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		if r < 0 {
			return
		}
		if f.literal {
			if r == 0 {
				yield(1, f.raw)
			}
			return
		}
		s, rs, cs := f.raw, f.d.Repetition, f.d.Component
		start := 0
		if r > 0 { // skip to the start of repetition r
			if rs == 0 {
				return
			}
			for i := 0; i < len(s) && r > 0; i++ {
				if s[i] == rs {
					r--
					start = i + 1
				}
			}
			if r > 0 {
				return
			}
		}
		c := 1
		for i := start; i < len(s); i++ {
			switch b := s[i]; {
			case b == cs && cs != 0:
				if !yield(c, f.decode(s[start:i])) {
					return
				}
				c++
				start = i + 1
			case b == rs && rs != 0:
				yield(c, f.decode(s[start:i]))
				return
			}
		}
		yield(c, f.decode(s[start:]))
	}
}

// locate returns component c (0-based) of repetition r in one pass that
// stops at the component's end, or "" when either is missing.
func (f Field) locate(r, c int) string {
	s, rs, cs := f.raw, f.d.Repetition, f.d.Component
	if rs == 0 || cs == 0 || r < 0 {
		rep, _ := nth(s, rs, r)
		v, _ := nth(rep, cs, c)
		return v
	}
	rr, cc, start := 0, 0, 0
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b != cs && b != rs {
			continue
		}
		if rr == r && cc == c {
			return s[start:i]
		}
		if b == cs {
			cc++
		} else {
			if rr == r {
				return "" // the repetition has fewer components
			}
			rr++
			cc = 0
		}
		start = i + 1
	}
	if rr == r && cc == c {
		return s[start:]
	}
	return ""
}

// SetComponent sets a component to a plain value and encodes it: with
// subcomponent Whole every delimiter but the subcomponent separator is
// escaped (so "A&B" sets two subcomponents), otherwise all are. Missing
// repetitions, components and subcomponents are added as empty ones
// (Medplum: field.setComponent). It returns false for component < 1,
// subcomponent < Whole, repetition < 0 and for MSH-1 and MSH-2. If f came
// from a segment, the segment is updated too.
func (f *Field) SetComponent(component int, value string, subcomponent, repetition int) bool {
	if f.literal || component < 1 || subcomponent < Whole || repetition < 0 {
		return false
	}
	d := f.d
	if (repetition > 0 && d.Repetition == 0) || (component > 1 && d.Component == 0) || (subcomponent > 0 && d.Subcomponent == 0) {
		return false // the message declared no separator to express this
	}
	reps := splitPad(f.raw, d.Repetition, repetition+1)
	comps := splitPad(reps[repetition], d.Component, component)
	if subcomponent == Whole {
		comps[component-1] = d.encode(value, true)
	} else {
		subs := splitPad(comps[component-1], d.Subcomponent, subcomponent+1)
		subs[subcomponent] = d.encode(value, false)
		comps[component-1] = join(subs, d.Subcomponent)
	}
	reps[repetition] = join(comps, d.Component)
	raw := join(reps, d.Repetition)
	if f.m != nil {
		// Write by position: f's segment may have been edited since f was
		// read, in which case this replaces the field's current text.
		s := Segment{m: f.m, i: int(f.seg)}
		f.m.setSegmentText(s.i, s.replaceField(int(f.idx), raw))
	}
	f.raw = raw
	f.noEsc = false
	return true
}

// nth returns the n-th (0-based) piece of s split on sep; ok is false when
// there are fewer pieces. sep 0 means "not declared": s is one piece.
// Values are short, so a byte loop beats strings.IndexByte's call overhead.
func nth(s string, sep byte, n int) (piece string, ok bool) {
	if n < 0 {
		return "", false
	}
	if sep == 0 {
		if n == 0 {
			return s, true
		}
		return "", false
	}
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			if n == 0 {
				return s[start:i], true
			}
			n--
			start = i + 1
		}
	}
	if n == 0 {
		return s[start:], true
	}
	return "", false
}

// count returns the number of sep bytes in s (0 when sep is 0).
func count(s string, sep byte) int {
	if sep == 0 {
		return 0
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			n++
		}
	}
	return n
}

// splitPad splits s on sep into at least n pieces.
func splitPad(s string, sep byte, n int) []string {
	var parts []string
	if sep == 0 {
		parts = []string{s}
	} else {
		parts = strings.Split(s, string(sep))
	}
	for len(parts) < n {
		parts = append(parts, "")
	}
	return parts
}

func join(parts []string, sep byte) string {
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts, string(sep))
}

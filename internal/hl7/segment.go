package hl7

// Segment is one segment of a Message: a position in it, so it sees later
// changes made through any handle. The zero Segment has no name and no
// fields.
type Segment struct {
	m *Message
	i int
}

// Name returns the segment name, e.g. "PID" (Medplum: seg.name).
func (s Segment) Name() string {
	if s.m == nil {
		return ""
	}
	return s.m.segName(s.i)
}

// String returns the segment's wire text, without a line break.
func (s Segment) String() string {
	if s.m == nil {
		return ""
	}
	return s.m.segText(s.i)
}

// Index returns the segment's 0-based position in its message.
func (s Segment) Index() int { return s.i }

// FieldCount returns the highest field number Field accepts: for MSH, the
// last MSH-n present; otherwise the number of fields after the name.
func (s Segment) FieldCount() int {
	if s.m == nil {
		return 0
	}
	x := s.m.fields(s.i)
	n := len(x.ends)
	if x.msh {
		return n // MSH-1 is the separator between the name and MSH-2
	}
	return n - 1
}

// Field returns field i, 1-based as in HL7 (PID-5 is Field(5)); Field(0) is
// the name. For MSH, Field(1) is the field separator and Field(2) the
// encoding characters, both read-only, and Field(n) for n > 2 is MSH-n, as in
// Medplum's getField. A field beyond the end (Medplum: undefined) is empty
// and Exists reports false.
func (s Segment) Field(i int) Field {
	if s.m == nil || i < 0 {
		return Field{}
	}
	x := s.m.fields(s.i)
	d := s.m.delims
	k := i // index into the split text
	if x.msh {
		switch {
		case i == 1:
			if len(x.text) > 3 {
				return Field{raw: x.text[3:4], d: d, literal: true, exists: true}
			}
			return Field{raw: string(d.Field), d: d, literal: true, exists: true}
		case i == 2:
			if len(x.ends) < 2 {
				return Field{d: d}
			}
			return Field{raw: x.field(1), d: d, literal: true, exists: true}
		case i > 2:
			k = i - 1
		}
	}
	if k >= len(x.ends) {
		return Field{d: d}
	}
	return Field{raw: x.field(k), d: d, m: s.m, seg: int32(s.i), idx: int32(k), exists: true, noEsc: !x.esc}
}

// field returns the k-th text between field separators (0 = the name).
func (x *fieldIndex) field(k int) string {
	start := 0
	if k > 0 {
		start = int(x.ends[k-1]) + 1
	}
	return x.text[start:x.ends[k]]
}

// Component returns the decoded value of a component of field i; see
// Field.Component for the indexes (Medplum: seg.getComponent). A missing
// field reads as "".
func (s Segment) Component(field, component, subcomponent, repetition int) string {
	return s.Field(field).Component(component, subcomponent, repetition)
}

// SetField sets field i (1-based, MSH offsets as in Field) to a plain value,
// encoding any delimiter in it, and adds empty fields as needed (Medplum:
// seg.setField). It returns false for i < 1 and for MSH-1 and MSH-2.
func (s Segment) SetField(i int, value string) bool {
	if s.m == nil {
		return false
	}
	return s.SetFieldRaw(i, s.m.delims.encode(value, false))
}

// SetFieldRaw is SetField for wire text that may contain component,
// repetition and subcomponent separators. It returns false if raw contains
// the field separator or a line break.
func (s Segment) SetFieldRaw(i int, raw string) bool {
	if s.m == nil || i < 1 {
		return false
	}
	k := i
	if s.m.fields(s.i).msh {
		if i <= 2 {
			return false
		}
		k = i - 1
	}
	fs := s.m.delims.Field
	for j := 0; j < len(raw); j++ {
		if c := raw[j]; c == fs || c == '\r' || c == '\n' {
			return false
		}
	}
	s.m.setSegmentText(s.i, s.replaceField(k, raw))
	return true
}

// replaceField returns the segment text with the k-th split field replaced,
// padding with empty fields.
func (s Segment) replaceField(k int, raw string) string {
	x := s.m.fields(s.i)
	n := len(x.ends)
	fs := s.m.delims.Field
	text := x.text
	if k >= n {
		b := make([]byte, 0, len(text)+k-n+1+len(raw))
		b = append(b, text...)
		for j := n; j <= k; j++ {
			b = append(b, fs)
		}
		return string(append(b, raw...))
	}
	start := 0
	if k > 0 {
		start = int(x.ends[k-1]) + 1
	}
	return text[:start] + raw + text[x.ends[k]:]
}

// SetComponent sets one component of field i; see Field.SetComponent
// (Medplum: seg.setComponent). It returns false when the field does not
// exist.
func (s Segment) SetComponent(field, component int, value string, subcomponent, repetition int) bool {
	f := s.Field(field)
	if !f.exists {
		return false
	}
	return f.SetComponent(component, value, subcomponent, repetition)
}

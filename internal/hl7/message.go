package hl7

import (
	"errors"
	"fmt"
	"strings"
)

// Message is a parsed HL7 v2 message. Create one with [Parse]; the zero
// value is not usable.
type Message struct {
	delims Delimiters
	raw    string    // input after BOM and MLLP stripping, original line breaks
	segs   []segment // in message order
	ends   []int32   // field end offsets, relative to the segment text, for all segments
	str    string    // String() result, "" until computed or after a change
}

// segment is one line of the message. Field k (0 = the name) of the
// segment ends at ends[lo+k]; hi-lo is the number of fields.
type segment struct {
	text   string
	lo, hi int32
	msh    bool // MSH-1 and MSH-2 are delimiter declarations
	esc    bool // contains the escape character, so values may need decoding
}

// Delimiters returns the separators declared in the first MSH segment.
func (m *Message) Delimiters() Delimiters { return m.delims }

// NumSegments returns the number of segments.
func (m *Message) NumSegments() int { return len(m.segs) }

// Segments returns every segment in order (Medplum: msg.segments).
func (m *Message) Segments() []Segment {
	out := make([]Segment, len(m.segs))
	for i := range out {
		out[i] = Segment{m: m, i: i}
	}
	return out
}

// Header returns the first segment, which Parse guarantees is MSH
// (Medplum: msg.header).
func (m *Message) Header() Segment { return Segment{m: m, i: 0} }

// SegmentAt returns the segment at 0-based index i (Medplum:
// msg.getSegment(i)). ok is false when i is out of range.
func (m *Message) SegmentAt(i int) (s Segment, ok bool) {
	if i < 0 || i >= len(m.segs) {
		return Segment{}, false
	}
	return Segment{m: m, i: i}, true
}

// Segment returns the first segment called name (Medplum:
// msg.getSegment(name)). ok is false when there is none.
func (m *Message) Segment(name string) (s Segment, ok bool) {
	for i := range m.segs {
		if m.segName(i) == name {
			return Segment{m: m, i: i}, true
		}
	}
	return Segment{}, false
}

// AllSegments returns every segment called name, in order (Medplum:
// msg.getAllSegments(name)).
func (m *Message) AllSegments(name string) []Segment {
	var out []Segment
	for i := range m.segs {
		if m.segName(i) == name {
			out = append(out, Segment{m: m, i: i})
		}
	}
	return out
}

// String returns the message with segments joined by CR and no trailing CR.
// Each segment is the parsed (or set) text byte for byte.
func (m *Message) String() string {
	if m.str == "" {
		m.str = m.join()
	}
	return m.str
}

// join returns the segments joined by CR.
func (m *Message) join() string {
	if len(m.segs) == 0 {
		return ""
	}
	n := len(m.segs) - 1
	for i := range m.segs {
		n += len(m.segs[i].text)
	}
	var b strings.Builder
	b.Grow(n)
	for i := range m.segs {
		if i > 0 {
			b.WriteByte('\r')
		}
		b.WriteString(m.segs[i].text)
	}
	return b.String()
}

// Raw returns the text Parse was given, without BOM and MLLP framing but
// with its original line breaks. It does not reflect later changes.
func (m *Message) Raw() string { return m.raw }

// ErrSegmentPosition is returned by SetSegment and SetSegmentByName for a
// placement Medplum's setSegment refuses: MSH anywhere but first, or
// anything else first.
var ErrSegmentPosition = errors.New("MSH must be the first segment and only the first")

// SetSegment replaces the segment at index i with raw segment text, or
// appends it when i >= NumSegments() (Medplum: msg.setSegment(i, seg)).
// raw is wire text in the message's delimiters and is not encoded.
func (m *Message) SetSegment(i int, raw string) error {
	if i < 0 {
		return fmt.Errorf("setting segment %d: negative index", i)
	}
	if err := m.checkSegmentText(raw); err != nil {
		return fmt.Errorf("setting segment %d: %w", i, err)
	}
	if (i == 0) != (segmentName(raw, m.delims.Field) == "MSH") {
		return fmt.Errorf("setting segment %d: %w", i, ErrSegmentPosition)
	}
	if i == 0 {
		if d, msg, _ := delimitersFromMSH(raw); msg != "" || d != m.delims {
			return fmt.Errorf("setting segment 0: MSH must declare the message's delimiters %q", string(m.delims.Field)+m.delims.Encoding())
		}
	}
	if i >= len(m.segs) {
		m.segs = append(m.segs, segment{})
		i = len(m.segs) - 1
	}
	m.setSegmentText(i, raw)
	return nil
}

// SetSegmentByName replaces the first segment called name with raw segment
// text (Medplum: msg.setSegment(name, seg)). It fails when there is no such
// segment.
func (m *Message) SetSegmentByName(name, raw string) error {
	s, ok := m.Segment(name)
	if !ok {
		return fmt.Errorf("setting segment %q: no such segment", name)
	}
	return m.SetSegment(s.i, raw)
}

// AppendSegment adds a segment built from a name and plain field values,
// which it encodes. AppendSegment("NTE", "1", "", "a|b") writes
// `NTE|1||a\F\b`. It returns the new segment.
func (m *Message) AppendSegment(name string, fields ...string) (Segment, error) {
	if name == "MSH" {
		return Segment{}, fmt.Errorf("appending segment %q: %w", name, ErrSegmentPosition)
	}
	var b strings.Builder
	b.WriteString(name)
	for _, f := range fields {
		b.WriteByte(m.delims.Field)
		b.WriteString(m.delims.encode(f, false))
	}
	raw := b.String()
	if err := m.checkSegmentText(raw); err != nil {
		return Segment{}, fmt.Errorf("appending segment %q: %w", name, err)
	}
	m.segs = append(m.segs, segment{})
	m.setSegmentText(len(m.segs)-1, raw)
	return Segment{m: m, i: len(m.segs) - 1}, nil
}

func (m *Message) checkSegmentText(raw string) error {
	if strings.ContainsAny(raw, "\r\n") {
		return errors.New("segment text contains a line break")
	}
	name := segmentName(raw, m.delims.Field)
	if name == "" {
		return errors.New("segment has no name")
	}
	return nil
}

// setSegmentText replaces segment i and indexes its fields. The old field
// offsets stay in m.ends unused; edits are rare next to reads.
func (m *Message) setSegmentText(i int, text string) {
	lo := len(m.ends)
	fs := m.delims.Field
	for j := 0; j < len(text); j++ {
		if text[j] == fs {
			m.ends = append(m.ends, int32(j))
		}
	}
	m.ends = append(m.ends, int32(len(text)))
	m.segs[i] = segment{
		text: text,
		lo:   int32(lo),
		hi:   int32(len(m.ends)),
		msh:  m.ends[lo] == 3 && text[:3] == "MSH",
		esc:  m.delims.Escape != 0 && strings.IndexByte(text, m.delims.Escape) >= 0,
	}
	m.str = ""
}

func (m *Message) segName(i int) string {
	s := &m.segs[i]
	return s.text[:m.ends[s.lo]]
}

func segmentName(text string, fs byte) string {
	if i := strings.IndexByte(text, fs); i >= 0 {
		return text[:i]
	}
	return text
}

package hl7

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
)

// Message is a parsed HL7 v2 message. Create one with [Parse]; the zero
// value is not usable.
type Message struct {
	// A message keeps its text once and describes each segment by one int32
	// offset into it, so that it costs about 4 bytes per segment beyond the
	// text whatever the segments hold: a body of tiny segments or of tiny
	// fields, as a hostile client might send, cannot make it much larger
	// than the body. Field boundaries are found when a segment is read and
	// kept in cache for at most maxCache segments. Changed segments are kept
	// beside the text, in edits and added, until compact folds the edits
	// into a new text.

	delims Delimiters
	raw    string // input after BOM and MLLP stripping, original line breaks
	// text is the parsed segments joined by single CRs: raw itself (no copy)
	// when raw already used single CRs, otherwise a copy made by Parse.
	text string
	// starts[i] is the offset in text where parsed segment i begins, and
	// starts[len(starts)-1] is len(text)+1, so segment i is
	// text[starts[i]:starts[i+1]-1]. Parse sizes it exactly.
	starts []int32
	edits  map[int]string // parsed segments replaced since Parse, by index
	added  []string       // segments appended after the parsed ones
	str    string         // String() result, "" until computed or after a change
	// cache holds the field index of recently read segments: segment i in
	// slot i mod len(cache), a power of two. Readers fill it with atomic
	// stores, so reading stays safe from many goroutines.
	cache []atomic.Pointer[fieldIndex]
}

// maxCache bounds the number of segments whose field boundaries a message
// keeps. Messages with up to this many segments keep them all; larger ones
// keep segment i in slot i mod maxCache, which suits the usual reading in
// message order.
const maxCache = 64

// inlineFields is the number of field ends a fieldIndex holds without a
// second allocation; typical segments (MSH, PID, OBX) have fewer fields.
const inlineFields = 28

// fieldIndex records where the fields of one segment's text end. It is
// immutable once built.
type fieldIndex struct {
	seg  int    // segment index
	text string // the segment text the index describes
	// ends[k] is the end of field k (0 = the name) relative to text;
	// len(ends) is the number of fields.
	ends   []int32
	msh    bool // MSH-1 and MSH-2 are delimiter declarations
	esc    bool // text contains the escape character, so values may need decoding
	inline [inlineFields]int32
}

// newFieldIndex indexes the fields of text, segment seg of a message in
// delimiters d.
func newFieldIndex(seg int, text string, d Delimiters) *fieldIndex {
	x := &fieldIndex{seg: seg, text: text}
	fs := d.Field
	n := strings.Count(text, string(fs)) + 1
	if n <= inlineFields {
		x.ends = x.inline[:n]
	} else {
		x.ends = make([]int32, n)
	}
	// Fields average ten bytes: a byte loop beats a call per field.
	k := 0
	for j := 0; j < len(text); j++ {
		if text[j] == fs {
			x.ends[k] = int32(j)
			k++
		}
	}
	x.ends[k] = int32(len(text))
	x.msh = x.ends[0] == 3 && text[:3] == "MSH"
	x.esc = d.Escape != 0 && strings.IndexByte(text, d.Escape) >= 0
	return x
}

// fields returns the field index of segment i, from the cache or built and
// cached now.
func (m *Message) fields(i int) *fieldIndex {
	x := m.cache[i&(len(m.cache)-1)].Load()
	if x == nil || x.seg != i {
		x = m.indexFields(i)
	}
	return x
}

// indexFields builds and caches the field index of segment i.
func (m *Message) indexFields(i int) *fieldIndex {
	x := newFieldIndex(i, m.segText(i), m.delims)
	m.cache[i&(len(m.cache)-1)].Store(x)
	return x
}

// segText returns the wire text of segment i.
func (m *Message) segText(i int) string {
	n := len(m.starts) - 1
	if i >= n {
		return m.added[i-n]
	}
	if m.edits != nil {
		if t, ok := m.edits[i]; ok {
			return t
		}
	}
	return m.text[m.starts[i] : m.starts[i+1]-1]
}

// Delimiters returns the separators declared in the first MSH segment.
func (m *Message) Delimiters() Delimiters { return m.delims }

// NumSegments returns the number of segments.
func (m *Message) NumSegments() int { return len(m.starts) - 1 + len(m.added) }

// Segments returns every segment in order (Medplum: msg.segments).
func (m *Message) Segments() []Segment {
	out := make([]Segment, m.NumSegments())
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
	if i < 0 || i >= m.NumSegments() {
		return Segment{}, false
	}
	return Segment{m: m, i: i}, true
}

// Segment returns the first segment called name (Medplum:
// msg.getSegment(name)). ok is false when there is none.
func (m *Message) Segment(name string) (s Segment, ok bool) {
	for i, n := 0, m.NumSegments(); i < n; i++ {
		if m.named(i, name) {
			return Segment{m: m, i: i}, true
		}
	}
	return Segment{}, false
}

// AllSegments returns every segment called name, in order (Medplum:
// msg.getAllSegments(name)).
func (m *Message) AllSegments(name string) []Segment {
	var out []Segment
	for i, n := 0, m.NumSegments(); i < n; i++ {
		if m.named(i, name) {
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
	segs := m.NumSegments()
	if segs == 0 {
		return ""
	}
	n := segs - 1
	for i := 0; i < segs; i++ {
		n += len(m.segText(i))
	}
	var b strings.Builder
	b.Grow(n)
	for i := 0; i < segs; i++ {
		if i > 0 {
			b.WriteByte('\r')
		}
		b.WriteString(m.segText(i))
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
	if n := m.NumSegments(); i >= n {
		m.added = append(m.added, raw)
		i = n
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
	m.added = append(m.added, raw)
	i := m.NumSegments() - 1
	m.setSegmentText(i, raw)
	return Segment{m: m, i: i}, nil
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

// setSegmentText replaces segment i, which exists, and indexes its fields.
// A parsed segment's new text goes to m.edits; when edits outnumber a
// sixteenth of the parsed segments, compact folds them into the text, so
// the map stays small next to the text and each edit costs, amortised, the
// copying of about sixteen segments.
func (m *Message) setSegmentText(i int, text string) {
	if n := len(m.starts) - 1; i >= n {
		m.added[i-n] = text
	} else {
		if m.edits == nil {
			m.edits = make(map[int]string)
		}
		m.edits[i] = text
		if len(m.edits) > n/16+16 {
			m.compact()
		}
	}
	m.cache[i&(len(m.cache)-1)].Store(newFieldIndex(i, text, m.delims))
	m.str = ""
}

// compact rewrites m.text with the parsed segments as they are now and
// drops m.edits. Raw still returns the input. The cache is emptied so that
// its entries do not keep the previous text reachable.
func (m *Message) compact() {
	n := len(m.starts) - 1
	size := n - 1
	for i := 0; i < n; i++ {
		size += len(m.segText(i))
	}
	var b strings.Builder
	b.Grow(size)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte('\r')
		}
		t := m.segText(i) // before starts[i] changes
		m.starts[i] = int32(b.Len())
		b.WriteString(t)
	}
	m.starts[n] = int32(b.Len() + 1)
	m.text = b.String()
	m.edits = nil
	for i := range m.cache {
		m.cache[i].Store(nil)
	}
}

// segName returns the name of segment i: its text up to the first field
// separator.
func (m *Message) segName(i int) string {
	return segmentName(m.segText(i), m.delims.Field)
}

// named reports whether segment i is called name.
func (m *Message) named(i int, name string) bool {
	t := m.segText(i)
	return strings.HasPrefix(t, name) && (len(t) == len(name) || t[len(name)] == m.delims.Field)
}

func segmentName(text string, fs byte) string {
	if i := strings.IndexByte(text, fs); i >= 0 {
		return text[:i]
	}
	return text
}

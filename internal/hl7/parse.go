package hl7

import (
	"fmt"
	"math"
	"strings"
	"sync/atomic"
)

// ParseError reports input that is not an HL7 v2 message.
type ParseError struct {
	Line   int    // 1-based line of the input; CR, LF and CRLF each end a line
	Offset int    // 0-based byte offset into the text given to Parse
	Msg    string // what is wrong, without quoting message content
}

// Error implements error.
func (e *ParseError) Error() string {
	return fmt.Sprintf("hl7: line %d, offset %d: %s", e.Line, e.Offset, e.Msg)
}

const (
	mllpStart = 0x0b
	mllpEnd   = 0x1c
	bom       = "\xef\xbb\xbf"
)

// ParseBytes is Parse for a byte slice. It copies b once.
func ParseBytes(b []byte) (*Message, error) {
	return Parse(string(b))
}

// Parse parses one HL7 v2 message. The returned message refers to text
// without copying it; beyond text it allocates 4 bytes per segment and,
// when the segments are not separated by single CRs, one copy of text
// joined with CRs. Fields are indexed when a segment is first read.
//
// A UTF-8 byte order mark, MLLP framing and line breaks before MSH are
// skipped. After that the text must start with "MSH", a valid field
// separator and one to five encoding characters; everything after the MSH
// header is accepted as is (HL7 receivers are expected to be lenient with
// unknown segments and fields).
func Parse(text string) (*Message, error) {
	if len(text) >= math.MaxInt32 {
		return nil, &ParseError{Line: 1, Msg: "message larger than 2 GiB"}
	}
	start, end := frame(text)
	line := 1
	for start < end && (text[start] == '\r' || text[start] == '\n') {
		if text[start] == '\n' || start+1 == end || text[start+1] != '\n' {
			line++
		}
		start++
	}
	if start == end {
		return nil, &ParseError{Line: line, Offset: start, Msg: "empty message: no MSH segment"}
	}
	body := text[start:end]
	if !strings.HasPrefix(body, "MSH") {
		n := 0
		for n < 3 && n < len(body) && body[n] != '\r' && body[n] != '\n' {
			n++
		}
		return nil, &ParseError{Line: line, Offset: start, Msg: fmt.Sprintf("message must start with an MSH segment, found %q", body[:n])}
	}
	d, msg, at := delimitersFromMSH(body)
	if msg != "" {
		return nil, &ParseError{Line: line, Offset: start + at, Msg: msg}
	}
	m := &Message{delims: d, raw: body}
	m.index(body)
	return m, nil
}

// frame returns the bounds of text without a leading BOM and MLLP start
// block, in either order, and without the MLLP end block (0x1C, then
// usually CR) if the start block was there.
func frame(text string) (start, end int) {
	end = len(text)
	framed := false
	for i := 0; i < 2; i++ {
		switch {
		case strings.HasPrefix(text[start:], bom):
			start += len(bom)
		case start < end && text[start] == mllpStart:
			start++
			framed = true
		}
	}
	if !framed {
		return start, end
	}
	e := end
	for e > start && (text[e-1] == '\r' || text[e-1] == '\n') {
		e--
	}
	if e > start && text[e-1] == mllpEnd {
		end = e - 1
	}
	return start, end
}

// index records where each segment of body starts. For body that uses
// single CRs (as HL7 prescribes), m.text is body itself; otherwise index
// joins the non-empty lines with CR into one copy. Both paths count the
// segments first and allocate m.starts once, at its final size, so a message
// of tiny segments costs four bytes per segment and never a doubling slice.
// Fields are not looked at: Segment methods index them when read.
func (m *Message) index(body string) {
	end := len(body)
	for end > 0 && (body[end-1] == '\r' || body[end-1] == '\n') {
		end--
	}
	b := body[:end] // starts with "MSH": not empty
	if strings.IndexByte(b, '\n') < 0 && !strings.Contains(b, "\r\r") {
		n := strings.Count(b, "\r") + 1
		m.starts = make([]int32, n+1)
		if n > len(b)/16 { // short segments: a byte loop beats a call per segment
			k := 1
			for j := 0; j < len(b); j++ {
				if b[j] == '\r' {
					m.starts[k] = int32(j + 1)
					k++
				}
			}
		} else {
			at := 0
			for k := 1; k < n; k++ {
				at += strings.IndexByte(b[at:], '\r') + 1
				m.starts[k] = int32(at)
			}
		}
		m.starts[n] = int32(len(b) + 1)
		m.text = b
		m.str = b
	} else {
		m.indexLines(b)
	}
	size := min(len(m.starts)-1, maxCache)
	slots := 1
	for slots < size {
		slots *= 2
	}
	m.cache = make([]atomic.Pointer[fieldIndex], slots)
}

// indexLines indexes b, which has LF, CRLF or blank lines, into a copy whose
// segments are separated by single CRs. Parse does this at once rather
// than on the first String call, so that a parsed message is never written
// to and can be read from many goroutines.
func (m *Message) indexLines(b string) {
	// Pass 1: the number of non-empty lines and the size of the copy.
	n, size := 0, -1
	for i := 0; i < len(b); {
		j := i
		for j < len(b) && b[j] != '\r' && b[j] != '\n' {
			j++
		}
		if j > i {
			n++
			size += j - i + 1
		}
		i = j + 1
	}
	// Pass 2: copy them.
	m.starts = make([]int32, n+1)
	var t strings.Builder
	t.Grow(size)
	k := 0
	for i := 0; i < len(b); {
		j := i
		for j < len(b) && b[j] != '\r' && b[j] != '\n' {
			j++
		}
		if j > i {
			if k > 0 {
				t.WriteByte('\r')
			}
			m.starts[k] = int32(t.Len())
			t.WriteString(b[i:j])
			k++
		}
		i = j + 1
	}
	m.starts[n] = int32(t.Len() + 1)
	m.text = t.String()
	m.str = m.text
}

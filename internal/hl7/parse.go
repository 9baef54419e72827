package hl7

import (
	"fmt"
	"math"
	"strings"
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
// without copying it.
//
// A UTF-8 byte order mark, MLLP framing and line breaks before MSH are
// skipped. After that the text must start with "MSH", a valid field
// separator and one to five encoding characters; everything after the MSH
// header is accepted as is (HL7 receivers are expected to be lenient with
// unknown segments and fields).
func Parse(text string) (*Message, error) {
	if len(text) > math.MaxInt32 {
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

// index splits body into segments and records where each field ends. It is
// the only pass over the whole message: one comparison per byte through a
// lookup table, appending to two slices sized from the input length.
func (m *Message) index(body string) {
	var class [256]byte
	const (
		plain = iota
		fieldSep
		lineBreak
		escape
	)
	class[m.delims.Field] = fieldSep // never CR or LF: see validDelimiter
	class['\r'] = lineBreak
	class['\n'] = lineBreak
	if m.delims.Escape != 0 {
		class[m.delims.Escape] = escape
	}

	// Typical messages average 8-12 bytes per field and 60-120 per segment.
	m.ends = make([]int32, 0, len(body)/8+16)
	m.segs = make([]segment, 0, len(body)/64+4)
	canonical := true // segments separated by exactly one CR
	prevEnd := -1
	segStart := 0
	esc := false // the current segment contains the escape character
	n := len(body)
	i := 0
	for {
		for i < n && class[body[i]] == plain {
			i++
		}
		if i < n {
			switch class[body[i]] {
			case fieldSep:
				m.ends = append(m.ends, int32(i-segStart))
				i++
				continue
			case escape:
				esc = true
				i++
				continue
			}
		}
		// A line break or the end of the text.
		if i > segStart { // not a blank line
			if prevEnd >= 0 && (segStart != prevEnd+1 || body[prevEnd] != '\r') {
				canonical = false
			}
			m.ends = append(m.ends, int32(i-segStart))
			m.addSegment(body[segStart:i], esc)
			prevEnd = i
		}
		if i >= n {
			break
		}
		i++
		segStart = i
		esc = false
	}
	if canonical {
		m.str = body[:prevEnd]
	} else {
		// Join now rather than on first String call, so a parsed message is
		// never written to and can be read from many goroutines.
		m.str = m.join()
	}
}

// addSegment appends a segment whose field ends were just appended to m.ends.
func (m *Message) addSegment(text string, esc bool) {
	lo := 0
	if len(m.segs) > 0 {
		lo = int(m.segs[len(m.segs)-1].hi)
	}
	m.segs = append(m.segs, segment{
		text: text,
		lo:   int32(lo),
		hi:   int32(len(m.ends)),
		msh:  m.ends[lo] == 3 && text[:3] == "MSH",
		esc:  esc,
	})
}

package botrunner

// quickScanJSON validates body and learns its jsonInfo in one pass, where scanJSONStd takes
// two (encoding/json's validator, a state machine that calls a function per byte, and then a
// scan for the depth and the resourceType): on the bench's Patient, the two were a fifth of what
// a worker spends turning the input into JavaScript values (issue 24). ok is false when body is
// not valid JSON as json.Valid judges it, or is nested deeper than MaxJSONDepth; the caller then
// asks scanJSONStd, whose error names where and why, so a refused body gets the same answer as
// before. body must be valid UTF-8 (parseBody checks it first).
func quickScanJSON(body []byte) (info jsonInfo, ok bool) {
	s := jsonScanner{b: body}
	s.space()
	if s.i == len(s.b) {
		return jsonInfo{}, false
	}
	info.top = s.b[s.i]
	if info.top == '{' {
		ok = s.object(1, &info)
	} else {
		ok = s.value(0)
	}
	if !ok {
		return jsonInfo{}, false
	}
	s.space()
	return info, s.i == len(s.b)
}

// jsonScanner checks RFC 8259 syntax, as encoding/json's scanner does: the same whitespace, number
// grammar, escapes and refusal of control characters in strings. It accepts bytes from 0x80 in
// strings without checking them, as encoding/json does.
type jsonScanner struct {
	b []byte
	i int
}

func (s *jsonScanner) space() { s.i = skipJSONSpace(s.b, s.i) }

// skipJSONSpace returns the index of the first byte from i on that is not JSON whitespace.
func skipJSONSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// value scans the value at s.i, which depth containers enclose.
func (s *jsonScanner) value(depth int) bool {
	if s.i == len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '{':
		return s.object(depth+1, nil)
	case '[':
		return s.array(depth + 1)
	case '"':
		return s.str()
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

// object scans the object at s.i, the depth-th container; info, when not nil, notes its
// resourceType member.
func (s *jsonScanner) object(depth int, info *jsonInfo) bool {
	done, ok := s.enter(depth, '}')
	for ok && !done {
		if s.i == len(s.b) || s.b[s.i] != '"' {
			return false
		}
		keyStart := s.i
		if !s.str() {
			return false
		}
		key := s.b[keyStart:s.i]
		s.space()
		if s.i == len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		valueStart := s.i
		if !s.value(depth) {
			return false
		}
		if info != nil && isResourceTypeKey(key) {
			var value []byte // nil unless the value is a string
			if s.b[valueStart] == '"' {
				value = s.b[valueStart:s.i]
			}
			info.noteMember(key, value)
		}
		done, ok = s.next('}')
	}
	return ok
}

// isResourceTypeKey says whether the quoted member name decodes to "resourceType", without
// decoding the names that plainly do not.
func isResourceTypeKey(quoted []byte) bool {
	if len(quoted) == len(`"resourceType"`) {
		return string(quoted) == `"resourceType"`
	}
	return len(quoted) > len(`"resourceType"`) && unquote(quoted) == "resourceType"
}

// array scans the array at s.i, the depth-th container.
func (s *jsonScanner) array(depth int) bool {
	done, ok := s.enter(depth, ']')
	for ok && !done {
		if !s.value(depth) {
			return false
		}
		done, ok = s.next(']')
	}
	return ok
}

// enter steps into the container at s.i, the depth-th, whose closing byte is end; done says
// it is empty, and has been stepped over.
func (s *jsonScanner) enter(depth int, end byte) (done, ok bool) {
	if depth > MaxJSONDepth {
		return false, false
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == end {
		s.i++
		return true, true
	}
	return false, true
}

// next steps over what follows a member or an item: a comma, or the container's end (done).
func (s *jsonScanner) next(end byte) (done, ok bool) {
	s.space()
	if s.i == len(s.b) {
		return false, false
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		s.space()
		return false, true
	case end:
		s.i++
		return true, true
	}
	return false, false
}

// str scans the string literal at s.i.
func (s *jsonScanner) str() bool {
	b := s.b
	for i := s.i + 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return true
		case c == '\\':
			i++
			if i == len(b) {
				return false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i <= 4 || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return false
				}
				i += 4
			default:
				return false
			}
		case c < 0x20:
			return false
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number scans a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i == len(b):
		return false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = s.digits(i + 1)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		if i++; i == len(b) || !isDigit(b[i]) {
			return false
		}
		i = s.digits(i + 1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i == len(b) || !isDigit(b[i]) {
			return false
		}
		i = s.digits(i + 1)
	}
	s.i = i
	return true
}

// digits returns the index of the first byte from i on that is not a digit.
func (s *jsonScanner) digits(i int) int {
	for i < len(s.b) && isDigit(s.b[i]) {
		i++
	}
	return i
}

func (s *jsonScanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

package hl7

import "strings"

// Decode replaces the escape sequences in a value with the text they stand
// for: \F\ \S\ \T\ \R\ \E\ (and \P\ when a truncation character is
// declared) with the delimiters, and \Xhh…\ with the bytes hh…. Formatting
// sequences such as \H\, \N\ and \.br\, malformed sequences and an unpaired
// escape character are kept as they are. Values without the escape
// character are returned without allocating.
func (d Delimiters) Decode(s string) string {
	e := d.Escape
	if e == 0 {
		return s
	}
	i := 0
	for i < len(s) && s[i] != e {
		i++
	}
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s))
	for i >= 0 {
		b = append(b, s[:i]...)
		s = s[i+1:]
		j := strings.IndexByte(s, e)
		if j < 0 { // unpaired: literal
			b = append(b, e)
			break
		}
		seq := s[:j]
		if c, ok := d.decodeSeq(seq); ok {
			b = append(b, c...)
		} else {
			b = append(b, e)
			b = append(b, seq...)
			b = append(b, e)
		}
		s = s[j+1:]
		i = strings.IndexByte(s, e)
	}
	b = append(b, s...)
	return string(b)
}

// decodeSeq returns the text for the escape sequence seq (without its
// escape characters), or ok false to keep it as it is.
func (d Delimiters) decodeSeq(seq string) (text []byte, ok bool) {
	switch len(seq) {
	case 0:
		return nil, false
	case 1:
		var c byte
		switch seq[0] {
		case 'F':
			c = d.Field
		case 'S':
			c = d.Component
		case 'T':
			c = d.Subcomponent
		case 'R':
			c = d.Repetition
		case 'E':
			c = d.Escape
		case 'P':
			c = d.Truncation
		}
		if c == 0 {
			return nil, false
		}
		return []byte{c}, true
	}
	if seq[0] != 'X' || len(seq)%2 != 1 {
		return nil, false
	}
	hex := seq[1:]
	out := make([]byte, len(hex)/2)
	for k := range out {
		hi, ok1 := unhex(hex[2*k])
		lo, ok2 := unhex(hex[2*k+1])
		if !ok1 || !ok2 {
			return nil, false
		}
		out[k] = hi<<4 | lo
	}
	return out, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Encode escapes every delimiter in a plain value, and CR and LF as \X0D\
// and \X0A\, so the value can be stored as one subcomponent. Without a
// declared escape character, values are returned unchanged.
func (d Delimiters) Encode(s string) string { return d.encode(s, false) }

// encode is Encode; keepSub leaves the subcomponent separator unescaped so
// a whole component can carry subcomponents.
func (d Delimiters) encode(s string, keepSub bool) string {
	e := d.Escape
	if e == 0 {
		return s
	}
	var special [256]bool
	special[d.Field] = true
	special[d.Component] = true
	special[d.Repetition] = true
	special[e] = true
	if !keepSub {
		special[d.Subcomponent] = true
	}
	special[d.Truncation] = true
	special['\r'] = true
	special['\n'] = true
	special[0] = false // undeclared delimiters are 0
	i := 0
	for i < len(s) && !special[s[i]] {
		i++
	}
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		c := s[i]
		if !special[c] {
			b = append(b, c)
			continue
		}
		var code string
		switch c {
		case d.Field:
			code = "F"
		case d.Component:
			code = "S"
		case d.Repetition:
			code = "R"
		case e:
			code = "E"
		case d.Subcomponent:
			code = "T"
		case d.Truncation:
			code = "P"
		case '\r':
			code = "X0D"
		case '\n':
			code = "X0A"
		}
		b = append(b, e)
		b = append(b, code...)
		b = append(b, e)
	}
	return string(b)
}

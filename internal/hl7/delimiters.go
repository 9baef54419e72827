package hl7

// Delimiters are the separators a message declares in MSH-1 and MSH-2.
// A zero byte means the message did not declare that character (MSH-2 may
// be shorter than four characters); values are then not split or escaped on
// it.
type Delimiters struct {
	Field        byte // MSH-1, usually '|'
	Component    byte // MSH-2 first character, usually '^'
	Repetition   byte // MSH-2 second character, usually '~'
	Escape       byte // MSH-2 third character, usually '\'
	Subcomponent byte // MSH-2 fourth character, usually '&'
	Truncation   byte // MSH-2 fifth character (HL7 v2.7+), usually '#'; often absent
}

// DefaultDelimiters are the delimiters HL7 recommends: |^~\&.
var DefaultDelimiters = Delimiters{Field: '|', Component: '^', Repetition: '~', Escape: '\\', Subcomponent: '&'}

// Encoding returns the MSH-2 text for d, e.g. `^~\&`.
func (d Delimiters) Encoding() string {
	b := make([]byte, 0, 5)
	for _, c := range [...]byte{d.Component, d.Repetition, d.Escape, d.Subcomponent, d.Truncation} {
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// validDelimiter reports whether c may be a separator: printable ASCII
// punctuation. Letters and digits would make segment names ambiguous, and
// whitespace or control characters would collide with line breaks.
func validDelimiter(c byte) bool {
	switch {
	case c <= ' ' || c >= 0x7f:
		return false
	case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return false
	}
	return true
}

// delimitersFromMSH reads MSH-1 and MSH-2 from the start of a segment that
// begins with "MSH". It returns the delimiters and the length of the
// encoding characters, or an error message and the offset it refers to.
func delimitersFromMSH(seg string) (d Delimiters, msg string, at int) {
	if len(seg) < 4 || seg[3] == '\r' || seg[3] == '\n' {
		return d, "truncated MSH segment: no field separator (MSH-1) after \"MSH\"", 3
	}
	fs := seg[3]
	if !validDelimiter(fs) {
		return d, "invalid field separator (MSH-1) " + quoteByte(fs) + ": must be ASCII punctuation", 3
	}
	d.Field = fs
	end := 4
	for end < len(seg) && seg[end] != fs && seg[end] != '\r' && seg[end] != '\n' {
		end++
	}
	enc := seg[4:end]
	switch {
	case len(enc) == 0:
		return d, "missing encoding characters (MSH-2) after the field separator", 4
	case len(enc) > 5:
		return d, "MSH-2 has too many encoding characters: want at most 5 (^~\\&#)", 4
	}
	slots := [...]*byte{&d.Component, &d.Repetition, &d.Escape, &d.Subcomponent, &d.Truncation}
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		if !validDelimiter(c) {
			return d, "invalid encoding character (MSH-2) " + quoteByte(c) + ": must be ASCII punctuation", 4 + i
		}
		if c == fs {
			return d, "encoding character (MSH-2) repeats the field separator", 4 + i
		}
		for j := 0; j < i; j++ {
			if enc[j] == c {
				return d, "encoding character (MSH-2) " + quoteByte(c) + " is used twice", 4 + i
			}
		}
		*slots[i] = c
	}
	return d, "", 0
}

func quoteByte(c byte) string {
	const hex = "0123456789abcdef"
	if c >= 0x20 && c < 0x7f {
		return "'" + string(rune(c)) + "'"
	}
	return "0x" + string([]byte{hex[c>>4], hex[c&15]})
}

package botrunner

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja_nodejs/buffer"
)

// Node's string encodings, shared by Buffer, atob/btoa and the crypto digests. Decoding is as
// lenient as Node's: base64 skips characters outside its alphabets and reads both the standard
// and the URL-safe one, hex stops at the first pair that is not hex.

// nodeEncoding is the canonical name of a Node encoding label, "" when Node does not know it.
func nodeEncoding(label string) string {
	switch strings.ToLower(label) {
	case "utf8", "utf-8":
		return "utf8"
	case "hex":
		return "hex"
	case "base64":
		return "base64"
	case "base64url":
		return "base64url"
	case "latin1", "binary":
		return "latin1"
	case "ascii":
		return "ascii"
	case "ucs2", "ucs-2", "utf16le", "utf-16le":
		return "utf16le"
	}
	return ""
}

var utf8Codec = buffer.StringCodecByName("utf8")

// encodeString turns a string into bytes in encoding enc (canonical).
func encodeString(s, enc string) []byte {
	switch enc {
	case "hex":
		return decodeHex(s)
	case "base64", "base64url":
		return decodeBase64(s)
	case "latin1", "ascii": // the low byte of each UTF-16 code unit
		b := make([]byte, 0, len(s))
		for _, r := range s {
			if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
				b = append(b, byte(r1), byte(r2))
			} else {
				b = append(b, byte(r))
			}
		}
		return b
	case "utf16le":
		b := make([]byte, 0, 2*len(s))
		for _, r := range s {
			if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
				b = append(b, byte(r1), byte(r1>>8), byte(r2), byte(r2>>8))
			} else {
				b = append(b, byte(r), byte(r>>8))
			}
		}
		return b
	}
	return []byte(s)
}

// decodeBytes turns bytes into a string in encoding enc (canonical).
func decodeBytes(b []byte, enc string) string {
	switch enc {
	case "hex":
		return hex.EncodeToString(b)
	case "base64":
		return base64.StdEncoding.EncodeToString(b)
	case "base64url":
		return base64.RawURLEncoding.EncodeToString(b)
	case "latin1", "ascii":
		mask := byte(0xff)
		if enc == "ascii" {
			mask = 0x7f
		}
		out := make([]byte, 0, len(b)+len(b)/4)
		for _, c := range b {
			out = utf8.AppendRune(out, rune(c&mask))
		}
		return string(out)
	case "utf16le":
		units := make([]uint16, len(b)/2)
		for i := range units {
			units[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
		}
		return string(utf16.Decode(units))
	}
	// As the Encoding standard (and Node) replace invalid sequences, not Go's one-per-run.
	return utf8Codec.Encode(b)
}

func decodeHex(s string) []byte {
	b := make([]byte, 0, len(s)/2)
	for i := 0; i+1 < len(s); i += 2 {
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			break
		}
		b = append(b, hi<<4|lo)
	}
	return b
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// decodeBase64 reads standard or URL-safe base64, padded or not, skipping other characters and
// stopping at the first '=', as Node does.
func decodeBase64(s string) []byte {
	clean := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '=':
			i = len(s)
		case c == '-':
			clean = append(clean, '+')
		case c == '_':
			clean = append(clean, '/')
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '+', c == '/':
			clean = append(clean, c)
		}
	}
	if len(clean)%4 == 1 {
		clean = clean[:len(clean)-1]
	}
	out := make([]byte, base64.RawStdEncoding.DecodedLen(len(clean)))
	n, _ := base64.RawStdEncoding.Decode(out, clean)
	return out[:n]
}

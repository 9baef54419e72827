package fhir

import (
	"strings"
	"testing"
)

func TestCheckBotPath(t *testing.T) {
	tests := []struct {
		name, path string
		ok         bool
	}{
		{"read", "Patient/123", true},
		{"batch", "", true},
		{"type", "Patient", true},
		{"history", "Patient/1/_history/2", true},
		{"operation", "Observation/$validate", true},
		{"escaped operation", "Bot/b1/%24execute", true},
		{"id with dots", "Patient/a.b-1", true},
		{"dots inside an id", "Patient/..a", true},
		{"trailing slash", "Patient/", true},

		{"dot-dot", "Patient/../outside", false},
		{"dot", "Patient/./1", false},
		{"escaped slash", "Patient/..%2f..%2foutside", false},
		{"escaped slash, upper case", "Patient/..%2F..%2Foutside", false},
		{"escaped slash in an id", "Patient/a%2Fb", false},
		{"escaped dots", "Patient/%2e%2e/outside", false},
		{"double-escaped dots", "Patient/%252e%252e/outside", false},
		{"double-escaped slash", "Patient/..%252f..%252foutside", false},
		{"triple-escaped dots", "Patient/%25252e%25252e/outside", false},
		{"mixed escaping", "Patient/.%2e/outside", false},
		{"escaped backslash", "Patient/..%5c..%5coutside", false},
		{"double-escaped backslash", "Patient/..%255coutside", false},
		{"backslash", "Patient\\..\\outside", false},
		{"servlet dot-dot", "Patient/..;/outside", false},
		{"escaped servlet dot-dot", "Patient/%2e%2e%3bx/outside", false},
		{"windows trailing space", "Patient/..%20/outside", false},
		{"three dots", "Patient/.../outside", false},
		{"NUL", "Patient/1%00", false},
		{"double-escaped NUL", "Patient/1%2500", false},
		{"raw newline", "Patient/1\r\nX-Injected: 1", false},
		{"escaped newline", "Patient/1%0d%0aX-Injected:%201", false},
		{"DEL", "Patient/1%7f", false},
		{"absolute", "/admin", false},
		{"query", "Patient?_id=1", false},
		{"fragment", "Patient#x", false},
		{"space", "Patient/a b", false},
		{"invalid escape", "Patient/%zz", false},
		{"invalid escape once decoded", "Patient/%25zz", false},
		{"lenient-decoder trick", "Patient/%%32%65%%32%65", false},
		{"escaped percent", "Patient/a%25b", false},
		{"encoded too often", "Patient/" + strings.Repeat("%25", 1) + strings.Repeat("25", 20) + "2e", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckBotPath(tt.path)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckBotPath(%q) = %v, want ok %v", tt.path, err, tt.ok)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "invalid FHIR path '") {
				t.Fatalf("error %q does not name the path", err)
			}
		})
	}
}

// FuzzBotPathNeverTraverses checks CheckBotPath against an oracle written
// apart from it: a lenient percent-decoder (valid %XX decoded, anything else
// kept, as the most forgiving servers do), applied to the whole path until
// it stops changing. Whatever CheckBotPath accepts must, so decoded, hold
// no dot segment (also after ;params are cut or trailing dots and spaces
// trimmed), no backslash, no control character, and exactly the segments
// it had before decoding.
func FuzzBotPathNeverTraverses(f *testing.F) {
	for _, s := range []string{
		"Patient/123", "", "Patient/..%2f..%2foutside", "Patient/%252e%252e/x", "Patient/%2e%2e;a/x",
		"Bot/x/%24execute", "Patient/%%32%65", "a/%25%32%65%25%32%65/b", "Patient/1/_history/2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if CheckBotPath(p) != nil {
			return
		}
		before := strings.Count(p, "/")
		d := p
		for range 64 {
			next := lenientDecode(d)
			if next == d {
				break
			}
			d = next
		}
		if lenientDecode(d) != d {
			t.Fatalf("accepted %q still decodes after 64 rounds", p)
		}
		if strings.Count(d, "/") != before {
			t.Fatalf("accepted %q decodes to %q: new separators", p, d)
		}
		if strings.ContainsAny(d, "\\") {
			t.Fatalf("accepted %q decodes to %q: a backslash", p, d)
		}
		for _, c := range []byte(d) {
			if c < 0x20 || c == 0x7f {
				t.Fatalf("accepted %q decodes to %q: a control character", p, d)
			}
		}
		for _, seg := range strings.Split(d, "/") {
			bare, _, _ := strings.Cut(seg, ";")
			if strings.Contains(bare, ".") && strings.TrimRight(bare, ". ") == "" {
				t.Fatalf("accepted %q decodes to %q: dot segment %q", p, d, seg)
			}
		}
	})
}

// lenientDecode decodes every valid %XX in s and keeps everything else.
func lenientDecode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHexDigit(s[i+1]) && isHexDigit(s[i+2]) {
			b.WriteByte(hexVal(s[i+1])<<4 | hexVal(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hexVal(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

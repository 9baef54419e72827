package hl7

import "testing"

func TestDecode(t *testing.T) {
	custom := Delimiters{Field: '_', Component: ':', Repetition: '!', Escape: '/', Subcomponent: '$'}
	tests := []struct {
		name string
		d    Delimiters
		in   string
		want string
	}{
		{"plain", DefaultDelimiters, "plain text", "plain text"},
		{"field", DefaultDelimiters, `a\F\b`, "a|b"},
		{"component", DefaultDelimiters, `a\S\b`, "a^b"},
		{"subcomponent", DefaultDelimiters, `a\T\b`, "a&b"},
		{"repetition", DefaultDelimiters, `a\R\b`, "a~b"},
		{"escape", DefaultDelimiters, `a\E\b`, `a\b`},
		{"all in a row", DefaultDelimiters, `\F\\S\\T\\R\\E\`, `|^&~\`},
		{"hex", DefaultDelimiters, `\X48656C6C6F\`, "Hello"},
		{"hex lower case UTF-8", DefaultDelimiters, `caf\Xc3a9\`, "café"},
		{"hex CR LF", DefaultDelimiters, `a\X0D0A\b`, "a\r\nb"},
		{"hex odd digits kept", DefaultDelimiters, `\X123\`, `\X123\`},
		{"hex bad digit kept", DefaultDelimiters, `\X4G\`, `\X4G\`},
		{"empty hex kept", DefaultDelimiters, `\X\`, `\X\`},
		{"highlight kept", DefaultDelimiters, `\H\bold\N\`, `\H\bold\N\`},
		{"line break kept", DefaultDelimiters, `one\.br\two`, `one\.br\two`},
		{"skip kept", DefaultDelimiters, `\.sp2\`, `\.sp2\`},
		{"character set kept", DefaultDelimiters, `\C2842\`, `\C2842\`},
		{"locally defined kept", DefaultDelimiters, `\Zabc\`, `\Zabc\`},
		{"truncation undeclared kept", DefaultDelimiters, `\P\`, `\P\`},
		{"truncation declared", Delimiters{'|', '^', '~', '\\', '&', '#'}, `a\P\b`, "a#b"},
		{"empty sequence kept", DefaultDelimiters, `a\\b`, `a\\b`},
		{"unpaired escape kept", DefaultDelimiters, `a\F`, `a\F`},
		{"unpaired after a sequence", DefaultDelimiters, `\F\x\`, `|x\`},
		{"multi-byte text around", DefaultDelimiters, `Zoë\T\Łukasz`, "Zoë&Łukasz"},
		{"custom delimiters", custom, `/F//S//R//E//T/`, `_:!/$`},
		{"no escape character", Delimiters{Field: '|', Component: '^'}, `a\F\b`, `a\F\b`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.Decode(tt.in); got != tt.want {
				t.Errorf("Decode(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestEncode(t *testing.T) {
	tests := []struct {
		name string
		d    Delimiters
		in   string
		want string
	}{
		{"plain", DefaultDelimiters, "plain", "plain"},
		{"every delimiter", DefaultDelimiters, `|^~\&`, `\F\\S\\R\\E\\T\`},
		{"line breaks", DefaultDelimiters, "a\r\nb", `a\X0D\\X0A\b`},
		{"truncation declared", Delimiters{'|', '^', '~', '\\', '&', '#'}, "#1", `\P\1`},
		{"hash undeclared is data", DefaultDelimiters, "#1", "#1"},
		{"custom", Delimiters{Field: '#', Component: '^', Repetition: '~', Escape: '\\', Subcomponent: '&'}, "a#b|c", `a\F\b|c`},
		{"UTF-8 untouched", DefaultDelimiters, "Zoë 🙂", "Zoë 🙂"},
		{"no escape character", Delimiters{Field: '|', Component: '^'}, "a^b", "a^b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.d.Encode(tt.in)
			if got != tt.want {
				t.Errorf("Encode(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if back := tt.d.Decode(got); tt.d.Escape != 0 && back != tt.in {
				t.Errorf("Decode(Encode(%q)) = %q", tt.in, back)
			}
		})
	}
}

func TestDecodeDoesNotAllocateWithoutEscapes(t *testing.T) {
	s := "EVERYPERSON^ADAM^A^III"
	if n := testing.AllocsPerRun(100, func() { _ = DefaultDelimiters.Decode(s) }); n != 0 {
		t.Errorf("Decode allocated %.0f times", n)
	}
	m := mustParse(t, adtSmall)
	pid, _ := m.Segment("PID")
	if n := testing.AllocsPerRun(100, func() { _ = pid.Component(5, 2, Whole, 1) }); n != 0 {
		t.Errorf("Component allocated %.0f times", n)
	}
}

package hl7

import (
	"errors"
	"strings"
	"testing"
	"unsafe"
)

func TestParseSamplesRoundTripAndReadKeyFields(t *testing.T) {
	type probe struct {
		seg              string
		field, comp, sub int
		rep              int
		want             string
	}
	tests := []struct {
		file     string
		segments int
		delims   string // MSH-1 + MSH-2
		probes   []probe
	}{
		{"adt_a01.hl7", 15, `|^~\&`, []probe{
			{"MSH", 9, 1, Whole, 0, "ADT"},
			{"MSH", 9, 2, Whole, 0, "A01"},
			{"MSH", 9, 3, Whole, 0, "ADT_A01"},
			{"MSH", 12, 1, Whole, 0, "2.5.1"},
			{"PID", 3, 1, Whole, 0, "MRN5550001"},
			{"PID", 3, 1, Whole, 1, "123-45-6789"},
			{"PID", 5, 2, Whole, 0, "ADAM"},
			{"PID", 5, 2, Whole, 1, "ADDIE"},
			{"PID", 13, 4, Whole, 1, "adam.everyperson@example.org"},
			{"NK1", 2, 1, Whole, 0, "EVERYPERSON"},
			{"PV1", 7, 6, Whole, 0, "DR"},
			{"IN1", 36, 1, Whole, 0, "POL0099887"},
		}},
		{"adt_a04_epic_lf.hl7", 8, `|^~\&`, []probe{
			{"MSH", 3, 1, Whole, 0, "EPIC"},
			{"MSH", 9, 2, Whole, 0, "A04"},
			{"MSH", 11, 1, Whole, 0, "D"},
			{"PID", 5, 1, Whole, 0, "DOE"},
			{"PID", 11, 3, Whole, 0, "MYTOWN"},
			{"PID", 18, 1, Whole, 1, "1129086"},
			{"PV1", 3, 1, Whole, 0, "168 "},
			{"PV1", 3, 1, Whole, 2, "C"},
		}},
		{"qbp_q11_utf8.hl7", 4, `|^~\&`, []probe{
			{"MSH", 3, 1, Whole, 0, "cobas® pro"},
			{"MSH", 4, 1, Whole, 0, "Roche Diagnostics"},
			{"QPD", 4, 3, Whole, 0, "Müller, Jürgen Ølstad"},
			{"NTE", 3, 1, Whole, 0, "Patient préféré: «Zoë Łukasiewicz» — 患者 テスト 🙂"},
		}},
		{"oul_r22.hl7", 19, `|^~\&`, []probe{
			{"MSH", 7, 1, Whole, 0, "20240312114502.123+0100"},
			{"SPM", 2, 1, 0, 0, "SPEC-55501"},
			{"SPM", 2, 1, 2, 0, "2.16.840.1.113883.19.3.1"},
			{"SPM", 2, 1, Whole, 0, "SPEC-55501&LIS&2.16.840.1.113883.19.3.1&ISO"},
			{"OBX", 3, 2, Whole, 0, "Cholesterol"},
			{"NTE", 3, 1, Whole, 0, `Result verified \.br\ automatically`},
		}},
		{"siu_s12_hash.hl7", 7, `#^~\&`, []probe{
			{"MSH", 3, 1, Whole, 0, "SCHED"},
			{"MSH", 9, 2, Whole, 0, "S12"},
			{"SCH", 11, 4, Whole, 0, "20240401093000"},
			{"AIP", 3, 2, Whole, 0, "ATTEND"},
			{"NTE", 3, 1, Whole, 0, `Bring list of medications # insurance card \ ID`},
		}},
		{"adt_a08_underscore.hl7", 4, `_:!/$`, []probe{
			{"MSH", 9, 2, Whole, 0, "A08"},
			{"MSH", 9, 3, Whole, 0, "ADT_A01"}, // escaped as /F/
			{"MSH", 10, 1, Whole, 0, "U-0001"},
			{"PID", 3, 1, Whole, 1, "ID78"},
			{"PID", 3, 4, Whole, 0, "HOSP"},
			{"PID", 5, 2, Whole, 0, "JANE"},
			{"NTE", 3, 1, Whole, 0, "Value with escaped _ underscore, : colon, ! bang, / slash and $ dollar"},
		}},
		{"oru_r01_escapes.hl7", 6, `|^~\&`, []probe{
			{"OBX", 5, 1, Whole, 0, `\H\FINDINGS:\N\\.br\Heart size normal & lungs clear.\.br\No effusion | pneumothorax.\.br\Grade 2^3 opacity; ref \~ Hello é \.sp2\ \Cxxyy\ \Zcustom\`},
		}},
		{"orm_o01_reps.hl7", 6, `|^~\&`, []probe{
			{"PID", 3, 4, 1, 1, "4.5.6"},
			{"PID", 3, 1, Whole, 2, "C3"},
			{"PID", 5, 1, Whole, 3, ""},
			{"OBR", 4, 2, Whole, 1, "Basic metabolic panel"},
			{"OBR", 16, 6, 1, 0, "Doctor"},
			{"ZDS", 2, 2, 2, 0, "subs"},
			{"ZDS", 2, 1, Whole, 1, "second"},
		}},
		{"vxu_v04_crlf.hl7", 6, `|^~\&`, []probe{
			{"RXA", 5, 2, Whole, 0, "Hep B, adolescent or pediatric"},
			{"RXR", 2, 1, Whole, 0, "RT"},
		}},
		{"oru_r01_large.hl7", 243, `|^~\&`, []probe{
			{"MSH", 10, 1, Whole, 0, "ICU-000777"},
			{"OBX", 1, 1, Whole, 0, "1"},
			{"OBX", 23, 6, 1, 0, "2.16.840.1.113883.4.7"},
		}},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			seen[tt.file] = true
			text := readSample(t, tt.file)
			m := mustParse(t, text)
			if got := m.NumSegments(); got != tt.segments {
				t.Errorf("NumSegments() = %d, want %d", got, tt.segments)
			}
			d := m.Delimiters()
			if got := string(d.Field) + d.Encoding(); got != tt.delims {
				t.Errorf("delimiters = %q, want %q", got, tt.delims)
			}
			if got, want := m.String(), canonical(text); got != want {
				t.Errorf("String() differs from the input's lines joined by CR\n got: %q\nwant: %q", got, want)
			}
			if m.Raw() != text {
				t.Errorf("Raw() is not the input")
			}
			for _, p := range tt.probes {
				s, ok := m.Segment(p.seg)
				if !ok {
					t.Fatalf("no %s segment", p.seg)
				}
				if got := s.Component(p.field, p.comp, p.sub, p.rep); got != p.want {
					t.Errorf("%s-%d.%d sub %d rep %d = %q, want %q", p.seg, p.field, p.comp, p.sub, p.rep, got, p.want)
				}
			}
		})
	}
	for name := range samples(t) {
		if !seen[name] {
			t.Errorf("sample %s has no test case", name)
		}
	}
}

func TestParseLineBreaksAndFraming(t *testing.T) {
	const want = "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5.1\rPID|1||X\rPV1|1|I"
	tests := []struct {
		name, text string
		zeroCopy   bool // String() returns the input without copying
	}{
		{"CR", "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5.1\rPID|1||X\rPV1|1|I", true},
		{"trailing CR", "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5.1\rPID|1||X\rPV1|1|I\r", true},
		{"LF", "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5.1\nPID|1||X\nPV1|1|I", false},
		{"trailing LF", "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5.1\nPID|1||X\nPV1|1|I\n", false},
		{"CRLF", "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5.1\r\nPID|1||X\r\nPV1|1|I\r\n", false},
		{"mixed", "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5.1\r\nPID|1||X\nPV1|1|I\r", false},
		{"blank lines", "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5.1\r\r\n\nPID|1||X\n\n\rPV1|1|I\n\n", false},
		{"leading line breaks", "\r\n\nMSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5.1\rPID|1||X\rPV1|1|I", true},
		{"MLLP", "\x0bMSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5.1\rPID|1||X\rPV1|1|I\r\x1c\r", true},
		{"MLLP without CR", "\x0bMSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5.1\rPID|1||X\rPV1|1|I\x1c", true},
		{"BOM", "\xef\xbb\xbfMSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5.1\rPID|1||X\rPV1|1|I", true},
		{"BOM inside MLLP", "\x0b\xef\xbb\xbfMSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5.1\nPID|1||X\nPV1|1|I\n\x1c\r", false},
		{"MLLP inside BOM", "\xef\xbb\xbf\x0bMSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5.1\rPID|1||X\rPV1|1|I\x1c\r", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustParse(t, tt.text)
			if m.NumSegments() != 3 {
				t.Fatalf("NumSegments() = %d, want 3 (no empty segment for blank or trailing lines)", m.NumSegments())
			}
			got := m.String()
			if got != want {
				t.Fatalf("String() = %q, want %q", got, want)
			}
			inside := uintptr(unsafe.Pointer(unsafe.StringData(got))) >= uintptr(unsafe.Pointer(unsafe.StringData(tt.text))) &&
				uintptr(unsafe.Pointer(unsafe.StringData(got))) < uintptr(unsafe.Pointer(unsafe.StringData(tt.text)))+uintptr(len(tt.text))
			if inside != tt.zeroCopy {
				t.Errorf("String() shares the input: %v, want %v", inside, tt.zeroCopy)
			}
			for i, name := range []string{"MSH", "PID", "PV1"} {
				if s, _ := m.SegmentAt(i); s.Name() != name {
					t.Errorf("segment %d = %q, want %q", i, s.Name(), name)
				}
			}
		})
	}
}

func TestParseMLLPEndBlockNeedsStartBlock(t *testing.T) {
	// Without 0x0B the 0x1C is data, so parse → String → parse is stable.
	m := mustParse(t, "MSH|^~\\&|A\x1c\x1c")
	if got := m.String(); got != "MSH|^~\\&|A\x1c\x1c" {
		t.Errorf("String() = %q", got)
	}
}

func TestParseErrorsSayWhatAndWhere(t *testing.T) {
	tests := []struct {
		name         string
		text         string
		line, offset int
		msg          string
	}{
		{"empty", "", 1, 0, "empty message"},
		{"only line breaks", "\r\n\r\n", 3, 4, "empty message"},
		{"MLLP frame only", "\x0b\x1c\r", 1, 1, "empty message"},
		{"PID first", "PID|1||X\rMSH|^~\\&", 1, 0, `must start with an MSH segment, found "PID"`},
		{"leading space", " MSH|^~\\&|A", 1, 0, `found " MS"`},
		{"lower case", "msh|^~\\&|A", 1, 0, `found "msh"`},
		{"after blank lines", "\n\nEVN|A01", 3, 2, `found "EVN"`},
		{"MSH alone", "MSH", 1, 3, "no field separator"},
		{"MSH then CR", "MSH\rPID|1", 1, 3, "no field separator"},
		{"letter separator", "MSHA^~\\&A", 1, 3, "invalid field separator (MSH-1) 'A'"},
		{"space separator", "MSH ^~\\& A", 1, 3, "invalid field separator (MSH-1) ' '"},
		{"no encoding characters", "MSH|", 1, 4, "missing encoding characters (MSH-2)"},
		{"empty MSH-2", "MSH||A|B", 1, 4, "missing encoding characters (MSH-2)"},
		{"MSH-2 then CR", "MSH|\rPID", 1, 4, "missing encoding characters (MSH-2)"},
		{"duplicate encoding character", "MSH|^~\\^|A", 1, 7, "'^' is used twice"},
		{"too many encoding characters", "MSH|^~\\&#!|A", 1, 4, "too many encoding characters"},
		{"digit encoding character", "MSH|^~1&|A", 1, 6, "invalid encoding character (MSH-2) '1'"},
		{"offset counts BOM", "\xef\xbb\xbfMSH|", 1, 7, "missing encoding characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.text)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error = %v, want *ParseError", err)
			}
			if pe.Line != tt.line || pe.Offset != tt.offset || !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("got line %d offset %d %q, want line %d offset %d containing %q", pe.Line, pe.Offset, pe.Msg, tt.line, tt.offset, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), "hl7: line ") {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func TestParseAcceptsShortEncodingCharacters(t *testing.T) {
	tests := []struct {
		name, text string
		want       Delimiters
	}{
		{"minimal", "MSH|^~\\&", DefaultDelimiters},
		{"truncation character", "MSH|^~\\&#|A", Delimiters{'|', '^', '~', '\\', '&', '#'}},
		{"no subcomponents", "MSH|^~\\|A", Delimiters{'|', '^', '~', '\\', 0, 0}},
		{"components only", "MSH|^|A^B", Delimiters{Field: '|', Component: '^'}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustParse(t, tt.text)
			if m.Delimiters() != tt.want {
				t.Errorf("Delimiters() = %+v, want %+v", m.Delimiters(), tt.want)
			}
			if m.String() != tt.text {
				t.Errorf("String() = %q", m.String())
			}
		})
	}
}

func TestParseBytesCopiesInput(t *testing.T) {
	b := []byte("MSH|^~\\&|A\rPID|1")
	m, err := ParseBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	b[10] = 'Z'
	if got := m.Header().Component(3, 1, Whole, 0); got != "A" {
		t.Errorf("MSH-3 = %q after the caller reused its buffer", got)
	}
}

func TestParsedMessageIsSafeForConcurrentReads(t *testing.T) {
	// LF input: String must not cache lazily (run with -race).
	m := mustParse(t, readSample(t, "adt_a04_epic_lf.hl7"))
	done := make(chan string, 4)
	for i := 0; i < 4; i++ {
		go func() {
			pid, _ := m.Segment("PID")
			done <- m.String()[:3] + pid.Component(5, 1, Whole, 0)
		}()
	}
	for i := 0; i < 4; i++ {
		if got := <-done; got != "MSHDOE" {
			t.Errorf("got %q", got)
		}
	}
}

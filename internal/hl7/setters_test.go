package hl7

import (
	"errors"
	"testing"
)

func TestSegmentSetField(t *testing.T) {
	tests := []struct {
		name  string
		seg   string // name of the segment to change in adtSmall
		raw   bool
		i     int
		value string
		ok    bool
		want  string // the segment afterwards
	}{
		{"replace", "PV1", false, 2, "O", true, "PV1|1|O"},
		{"encode", "PV1", false, 2, "a|b^c~d\\e&f", true, `PV1|1|a\F\b\S\c\R\d\E\e\T\f`},
		{"pad", "PV1", false, 5, "X", true, "PV1|1|I|||X"},
		{"first field", "PV1", false, 1, "", true, "PV1||I"},
		{"raw keeps components", "PV1", true, 3, "ICU^05^A", true, "PV1|1|I|ICU^05^A"},
		{"raw refuses field separator", "PV1", true, 3, "a|b", false, "PV1|1|I"},
		{"raw refuses line break", "PV1", true, 3, "a\rb", false, "PV1|1|I"},
		{"name is not a field", "PV1", false, 0, "ZZZ", false, "PV1|1|I"},
		{"MSH-1 is fixed", "MSH", false, 1, "#", false, "MSH|^~\\&|APP|FAC"},
		{"MSH-2 is fixed", "MSH", false, 2, "^~", false, "MSH|^~\\&|APP|FAC"},
		{"MSH-3 offset", "MSH", false, 3, "NEWAPP", true, "MSH|^~\\&|NEWAPP|FAC"},
		{"MSH pad", "MSH", false, 6, "RF", true, "MSH|^~\\&|APP|FAC||RF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustParse(t, "MSH|^~\\&|APP|FAC\rPV1|1|I")
			s, _ := m.Segment(tt.seg)
			var ok bool
			if tt.raw {
				ok = s.SetFieldRaw(tt.i, tt.value)
			} else {
				ok = s.SetField(tt.i, tt.value)
			}
			if ok != tt.ok {
				t.Errorf("ok = %v, want %v", ok, tt.ok)
			}
			if s.String() != tt.want {
				t.Errorf("segment = %q, want %q", s.String(), tt.want)
			}
			if ok && !tt.raw && s.Field(tt.i).Component(1, 0, 0) != tt.value {
				t.Errorf("read back %q, want %q", s.Field(tt.i).Component(1, 0, 0), tt.value)
			}
			again := mustParse(t, m.String())
			if again.String() != m.String() {
				t.Errorf("reparse changed the message")
			}
		})
	}
}

func TestFieldSetComponent(t *testing.T) {
	tests := []struct {
		name     string
		field    string
		comp     int
		value    string
		sub, rep int
		ok       bool
		want     string
	}{
		{"replace", "A^B^C", 2, "X", Whole, 0, true, "A^X^C"},
		{"grow components", "A", 3, "C", Whole, 0, true, "A^^C"},
		{"grow repetitions", "A", 1, "B", Whole, 2, true, "A~~B"},
		{"set in repetition", "A^B~C^D", 2, "X", Whole, 1, true, "A^B~C^X"},
		{"subcomponent", "A&B^C", 1, "X", 1, 0, true, "A&X^C"},
		{"grow subcomponents", "A^C", 1, "X", 2, 0, true, "A&&X^C"},
		{"subcomponent in empty field", "", 2, "X", 1, 0, true, "^&X"},
		{"whole component keeps &", "", 1, "A&B", Whole, 0, true, "A&B"},
		{"subcomponent escapes &", "", 1, "A&B", 0, 0, true, `A\T\B`},
		{"encodes the rest", "", 1, "a|b^c~d\\e", Whole, 0, true, `a\F\b\S\c\R\d\E\e`},
		{"component zero", "A", 0, "X", Whole, 0, false, "A"},
		{"negative subcomponent", "A", 1, "X", -2, 0, false, "A"},
		{"negative repetition", "A", 1, "X", Whole, -1, false, "A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ParseField(tt.field, DefaultDelimiters)
			ok := f.SetComponent(tt.comp, tt.value, tt.sub, tt.rep)
			if ok != tt.ok || f.String() != tt.want {
				t.Errorf("SetComponent = %v, %q; want %v, %q", ok, f.String(), tt.ok, tt.want)
			}
		})
	}
}

func TestSetComponentWritesThroughToMessage(t *testing.T) {
	m := mustParse(t, adtSmall)
	pid, _ := m.Segment("PID")
	f := pid.Field(5)
	if !f.SetComponent(2, "JANE", Whole, 0) {
		t.Fatal("SetComponent failed")
	}
	if !pid.SetComponent(5, 1, "O'NEIL & SONS", 0, 1) {
		t.Fatal("Segment.SetComponent failed")
	}
	if got, want := pid.Field(5).String(), `DOE^JANE^Q~O'NEIL \T\ SONS^JOHNNY`; got != want {
		t.Errorf("PID-5 = %q, want %q", got, want)
	}
	if pid.SetComponent(30, 1, "X", Whole, 0) {
		t.Error("SetComponent on a missing field succeeded (Medplum returns false)")
	}
	if m.Header().SetComponent(2, 1, "x", Whole, 0) {
		t.Error("SetComponent on MSH-2 succeeded")
	}
	again := mustParse(t, m.String())
	p2, _ := again.Segment("PID")
	if got := p2.Component(5, 1, Whole, 1); got != "O'NEIL & SONS" {
		t.Errorf("after reparse PID-5.1 rep 1 = %q", got)
	}
	if m.Raw() != adtSmall {
		t.Error("Raw() changed after an edit")
	}
}

func TestMessageSetSegment(t *testing.T) {
	const base = "MSH|^~\\&|A\rPID|1\rOBX|1\rOBX|2"
	tests := []struct {
		name    string
		set     func(m *Message) error
		wantErr error
		want    string
	}{
		{"replace by index", func(m *Message) error { return m.SetSegment(2, "OBX|9") }, nil, "MSH|^~\\&|A\rPID|1\rOBX|9\rOBX|2"},
		{"append past the end", func(m *Message) error { return m.SetSegment(99, "NTE|1") }, nil, base + "\rNTE|1"},
		{"replace MSH", func(m *Message) error { return m.SetSegment(0, "MSH|^~\\&|B") }, nil, "MSH|^~\\&|B\rPID|1\rOBX|1\rOBX|2"},
		{"MSH elsewhere", func(m *Message) error { return m.SetSegment(1, "MSH|^~\\&|B") }, ErrSegmentPosition, base},
		{"non-MSH first", func(m *Message) error { return m.SetSegment(0, "PID|2") }, ErrSegmentPosition, base},
		{"MSH with other delimiters", func(m *Message) error { return m.SetSegment(0, "MSH#^~\\&#B") }, errAny, base},
		{"by name", func(m *Message) error { return m.SetSegmentByName("OBX", "OBX|7") }, nil, "MSH|^~\\&|A\rPID|1\rOBX|7\rOBX|2"},
		{"by missing name", func(m *Message) error { return m.SetSegmentByName("ZZZ", "ZZZ|1") }, errAny, base},
		{"MSH by name", func(m *Message) error { return m.SetSegmentByName("PID", "MSH|^~\\&|B") }, ErrSegmentPosition, base},
		{"line break", func(m *Message) error { return m.SetSegment(1, "PID|1\rPV1|1") }, errAny, base},
		{"no name", func(m *Message) error { return m.SetSegment(1, "|1") }, errAny, base},
		{"negative", func(m *Message) error { return m.SetSegment(-1, "PID|1") }, errAny, base},
		{"append encodes", func(m *Message) error {
			_, err := m.AppendSegment("NTE", "1", "", "a|b\rc")
			return err
		}, nil, base + "\rNTE|1||a\\F\\b\\X0D\\c"},
		{"append MSH", func(m *Message) error {
			_, err := m.AppendSegment("MSH", "x")
			return err
		}, ErrSegmentPosition, base},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustParse(t, base)
			err := tt.set(m)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr == errAny && err == nil, tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if m.String() != tt.want {
				t.Errorf("String() = %q, want %q", m.String(), tt.want)
			}
		})
	}
}

var errAny = errors.New("any error")

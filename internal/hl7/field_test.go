package hl7

import "testing"

const adtSmall = "MSH|^~\\&|SENDAPP|SENDFAC|RECVAPP|RECVFAC|20240312081530||ADT^A01^ADT_A01|CTRL1|P|2.5.1\r" +
	"PID|1||MRN1^^^HOSP&1.2.3&ISO^MR~SSN9^^^USSSA^SS||DOE^JOHN^Q~ROE^JOHNNY||19800101|M\r" +
	"OBX|1|ST|CODE^Label||a\\T\\b&c\\S\\d^e||||||F\r" +
	"OBX|2|NM|WT^Weight||72|kg"

func TestSegmentFieldUsesMedplumMSHOffsets(t *testing.T) {
	m := mustParse(t, adtSmall)
	msh := m.Header()
	tests := []struct {
		i      int
		want   string
		exists bool
	}{
		{0, "MSH", true},
		{1, "|", true},
		{2, `^~\&`, true},
		{3, "SENDAPP", true},
		{6, "RECVFAC", true},
		{9, "ADT^A01^ADT_A01", true},
		{10, "CTRL1", true},
		{12, "2.5.1", true},
		{13, "", false},
		{-1, "", false},
	}
	for _, tt := range tests {
		f := msh.Field(tt.i)
		if f.String() != tt.want || f.Exists() != tt.exists {
			t.Errorf("MSH Field(%d) = %q exists %v, want %q exists %v", tt.i, f.String(), f.Exists(), tt.want, tt.exists)
		}
	}
	if got := msh.FieldCount(); got != 12 {
		t.Errorf("MSH FieldCount() = %d, want 12", got)
	}
	// MSH-1 and MSH-2 are single opaque components, as in Medplum.
	if got := msh.Component(2, 1, Whole, 0); got != `^~\&` {
		t.Errorf("MSH-2.1 = %q", got)
	}
	if got := msh.Field(2).Repetitions(); got != 1 {
		t.Errorf("MSH-2 repetitions = %d", got)
	}
	pid, _ := m.Segment("PID")
	if got := pid.FieldCount(); got != 8 {
		t.Errorf("PID FieldCount() = %d, want 8", got)
	}
	if got := pid.Field(0).String(); got != "PID" {
		t.Errorf("PID Field(0) = %q", got)
	}
	if got := pid.Field(1).String(); got != "1" {
		t.Errorf("PID Field(1) = %q", got)
	}
}

func TestFieldComponentIndexes(t *testing.T) {
	m := mustParse(t, adtSmall)
	pid, _ := m.Segment("PID")
	obx, _ := m.Segment("OBX")
	tests := []struct {
		name                  string
		seg                   Segment
		field, comp, sub, rep int
		want                  string
	}{
		{"first component", pid, 5, 1, Whole, 0, "DOE"},
		{"third component", pid, 5, 3, Whole, 0, "Q"},
		{"second repetition", pid, 5, 2, Whole, 1, "JOHNNY"},
		{"component past the end", pid, 5, 4, Whole, 0, ""},
		{"repetition past the end reads empty", pid, 5, 1, Whole, 2, ""},
		{"component zero", pid, 5, 0, Whole, 0, ""},
		{"whole component keeps subcomponent separators", pid, 3, 4, Whole, 0, "HOSP&1.2.3&ISO"},
		{"subcomponent is 0-based", pid, 3, 4, 0, 0, "HOSP"},
		{"last subcomponent", pid, 3, 4, 2, 0, "ISO"},
		{"subcomponent past the end", pid, 3, 4, 3, 0, ""},
		{"subcomponent 0 of a plain component", pid, 3, 1, 0, 0, "MRN1"},
		{"missing field", pid, 20, 1, Whole, 0, ""},
		{"decoded", obx, 5, 1, Whole, 0, "a&b&c^d"},
		{"escaped separator is not a separator", obx, 5, 1, 0, 0, "a&b"},
		{"escaped separator in later subcomponent", obx, 5, 1, 1, 0, "c^d"},
		{"after an escaped component separator", obx, 5, 2, Whole, 0, "e"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.seg.Component(tt.field, tt.comp, tt.sub, tt.rep); got != tt.want {
				t.Errorf("Component(%d, %d, %d, %d) = %q, want %q", tt.field, tt.comp, tt.sub, tt.rep, got, tt.want)
			}
		})
	}
}

func TestFieldShape(t *testing.T) {
	d := DefaultDelimiters
	tests := []struct {
		raw   string
		reps  int
		comps []int // per repetition, plus one out of range
	}{
		{"", 1, []int{1, 0}},
		{"A", 1, []int{1, 0}},
		{"A^B^C", 1, []int{3, 0}},
		{"A^B~C~~D^E^F^G", 4, []int{2, 1, 1, 4, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			f := ParseField(tt.raw, d)
			if got := f.Repetitions(); got != tt.reps {
				t.Errorf("Repetitions() = %d, want %d", got, tt.reps)
			}
			for r, want := range tt.comps {
				if got := f.NumComponents(r); got != want {
					t.Errorf("NumComponents(%d) = %d, want %d", r, got, want)
				}
			}
			if last := f.Repetition(tt.reps - 1); !last.Exists() {
				t.Errorf("last repetition does not exist")
			}
			if past := f.Repetition(tt.reps); past.Exists() || past.String() != "" {
				t.Errorf("Repetition past the end = %q", past.String())
			}
		})
	}
}

func TestSegmentLookups(t *testing.T) {
	m := mustParse(t, adtSmall)
	if s, ok := m.Segment("OBX"); !ok || s.Field(1).String() != "1" {
		t.Errorf("Segment(OBX) = %q, %v; want the first OBX", s.String(), ok)
	}
	if _, ok := m.Segment("ZZZ"); ok {
		t.Error("Segment(ZZZ) found a segment")
	}
	obx := m.AllSegments("OBX")
	if len(obx) != 2 || obx[1].Component(5, 1, Whole, 0) != "72" {
		t.Errorf("AllSegments(OBX) = %v", obx)
	}
	if got := m.AllSegments("ZZZ"); len(got) != 0 {
		t.Errorf("AllSegments(ZZZ) = %v", got)
	}
	if _, ok := m.SegmentAt(4); ok {
		t.Error("SegmentAt(4) found a segment")
	}
	if s, ok := m.SegmentAt(1); !ok || s.Name() != "PID" || s.Index() != 1 {
		t.Errorf("SegmentAt(1) = %q", s.Name())
	}
	segs := m.Segments()
	if len(segs) != 4 || segs[3].String() != "OBX|2|NM|WT^Weight||72|kg" {
		t.Errorf("Segments() = %v", segs)
	}
	var zero Segment
	if zero.Name() != "" || zero.String() != "" || zero.FieldCount() != 0 || zero.Field(1).Exists() || zero.SetField(1, "x") {
		t.Error("zero Segment is not empty")
	}
}

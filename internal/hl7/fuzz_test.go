package hl7

import (
	"testing"
)

// FuzzParse checks that Parse never panics, that parse → String → parse is
// stable, that every accessor is safe on whatever Parse accepts, and that a
// value set with SetField reads back unchanged. Seeds: testdata/*.hl7 and
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, text := range samples(f) {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		m, err := Parse(text)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error %T is not a *ParseError", err)
			}
			return
		}
		out := m.String()
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("reparse of String() failed: %v\n%q", err, out)
		}
		if again.String() != out || again.NumSegments() != m.NumSegments() || again.Delimiters() != m.Delimiters() {
			t.Fatalf("parse → String → parse is not stable:\n%q\n%q", out, again.String())
		}
		for i, s := range m.Segments() {
			s2, _ := again.SegmentAt(i)
			if s.String() != s2.String() || s.FieldCount() != s2.FieldCount() {
				t.Fatalf("segment %d differs after reparse", i)
			}
			checkReads(t, s)
		}
		if _, err := m.BuildAck(AckOptions{Code: AE}); err != nil {
			t.Fatalf("BuildAck: %v", err)
		}
		d := m.Delimiters()
		if d.Escape != 0 {
			if back := d.Decode(d.Encode(text)); back != text {
				t.Fatalf("Decode(Encode(x)) = %q, want %q", back, text)
			}
			last, _ := m.SegmentAt(m.NumSegments() - 1)
			if last.SetField(3, text) {
				if got := last.Component(3, 1, 0, 0); got != text {
					t.Fatalf("SetField value read back as %q", got)
				}
				if _, err := Parse(m.String()); err != nil {
					t.Fatalf("reparse after SetField: %v", err)
				}
			} else {
				t.Fatalf("SetField(3) refused on %q", last.Name())
			}
		}
	})
}

// readAll reads every component of every repetition of every field with
// Field.Components, returning the total length so the work is not
// optimised away.
func readAll(s Segment) int {
	n := 0
	for i, fields := 0, s.FieldCount(); i <= fields; i++ {
		f := s.Field(i)
		n += len(f.String())
		for r, reps := 0, f.Repetitions(); r < reps; r++ {
			for _, v := range f.Components(r) {
				n += len(v)
			}
		}
	}
	return n
}

// readAllByIndex is readAll with Medplum-style indexed reads.
func readAllByIndex(s Segment) int {
	n := 0
	for i, fields := 0, s.FieldCount(); i <= fields; i++ {
		f := s.Field(i)
		n += len(f.String())
		for r, reps := 0, f.Repetitions(); r < reps; r++ {
			for c, comps := 1, f.NumComponents(r); c <= comps; c++ {
				n += len(f.Component(c, Whole, r))
			}
		}
	}
	return n
}

// checkReads fails unless Components and indexed reads agree.
func checkReads(t *testing.T, s Segment) {
	for i, fields := 0, s.FieldCount(); i <= fields; i++ {
		f := s.Field(i)
		for r, reps := 0, f.Repetitions(); r < reps; r++ {
			seen := 0
			for c, v := range f.Components(r) {
				seen++
				if got := f.Component(c, Whole, r); got != v {
					t.Fatalf("%s-%d rep %d: Component(%d) = %q, Components yields %q", s.Name(), i, r, c, got, v)
				}
			}
			if comps := f.NumComponents(r); seen != comps {
				t.Fatalf("%s-%d rep %d: Components yielded %d, NumComponents = %d", s.Name(), i, r, seen, comps)
			}
		}
	}
}

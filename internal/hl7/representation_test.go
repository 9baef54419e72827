package hl7

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// manySegments returns a message of n segments besides MSH, more than the
// field cache holds, separated by sep, with blank lines every 50 when sep
// is not a single CR.
func manySegments(n int, sep string) string {
	var b strings.Builder
	b.WriteString(`MSH|^~\&|APP|FAC|||20240101||ADT^A01|1|P|2.5.1`)
	for i := 1; i <= n; i++ {
		b.WriteString(sep)
		if sep != "\r" && i%50 == 0 {
			b.WriteString(sep)
		}
		fmt.Fprintf(&b, "OBX|%d|ST|CODE%d^Name %d||value %d", i, i, i, i)
		for j := 0; j < i%7; j++ {
			fmt.Fprintf(&b, "|f%d", j)
		}
	}
	b.WriteString(sep)
	return b.String()
}

// setModelField is the reference for SetFieldRaw on a non-MSH segment:
// split on '|', pad, replace, join.
func setModelField(seg string, i int, raw string) string {
	parts := strings.Split(seg, "|")
	for len(parts) <= i {
		parts = append(parts, "")
	}
	parts[i] = raw
	return strings.Join(parts, "|")
}

// TestEditsMatchAReferenceModel edits a message of many segments many
// times — field setters, whole-segment replacements and appends, enough to
// fold the edits into the text several times — and checks after every step
// that the message reads as a plain list of segment strings edited the
// same way does. Reads in between fill and evict the field cache.
func TestEditsMatchAReferenceModel(t *testing.T) {
	for _, sep := range []string{"\r", "\n", "\r\n"} {
		t.Run(fmt.Sprintf("%q", sep), func(t *testing.T) {
			text := manySegments(300, sep)
			m := mustParse(t, text)
			model := strings.Split(canonical(text), "\r")
			rng := rand.New(rand.NewPCG(1, 2))
			check := func(step int, i int) {
				t.Helper()
				s, ok := m.SegmentAt(i)
				if !ok || s.String() != model[i] {
					t.Fatalf("step %d: segment %d = %q, want %q", step, i, s.String(), model[i])
				}
				fields := strings.Split(model[i], "|")
				if i == 0 {
					return
				}
				if s.FieldCount() != len(fields)-1 || s.Name() != fields[0] {
					t.Fatalf("step %d: segment %d has %d fields named %q, want %d named %q",
						step, i, s.FieldCount(), s.Name(), len(fields)-1, fields[0])
				}
				k := rng.IntN(len(fields))
				if got := s.Field(k).String(); got != fields[k] {
					t.Fatalf("step %d: segment %d field %d = %q, want %q", step, i, k, got, fields[k])
				}
			}
			for step := 0; step < 3000; step++ {
				i := 1 + rng.IntN(len(model)-1)
				s, _ := m.SegmentAt(i)
				switch op := rng.IntN(10); {
				case op < 6:
					k := 1 + rng.IntN(9)
					v := fmt.Sprintf("v%d^%d", step, k)
					if !s.SetFieldRaw(k, v) {
						t.Fatalf("step %d: SetFieldRaw refused", step)
					}
					model[i] = setModelField(model[i], k, v)
				case op < 8:
					raw := fmt.Sprintf("NTE|%d|edited", step)
					if err := m.SetSegment(i, raw); err != nil {
						t.Fatal(err)
					}
					model[i] = raw
				case op < 9:
					// Through a Field handle, which writes by position.
					f := s.Field(2)
					fields := strings.Split(model[i], "|")
					if len(fields) > 2 {
						if !f.SetComponent(2, fmt.Sprintf("c%d", step), Whole, 0) {
							t.Fatalf("step %d: SetComponent refused", step)
						}
						comps := strings.Split(strings.Split(fields[2], "~")[0], "^")
						if len(comps) < 2 {
							comps = append(comps, "")
						}
						comps[1] = fmt.Sprintf("c%d", step)
						model[i] = setModelField(model[i], 2, strings.Join(comps, "^"))
					}
				default:
					if _, err := m.AppendSegment("ZAP", fmt.Sprint(step)); err != nil {
						t.Fatal(err)
					}
					model = append(model, fmt.Sprintf("ZAP|%d", step))
				}
				check(step, i)
				check(step, rng.IntN(len(model)))
				if m.NumSegments() != len(model) {
					t.Fatalf("step %d: %d segments, want %d", step, m.NumSegments(), len(model))
				}
				if step%500 == 0 && m.String() != strings.Join(model, "\r") {
					t.Fatalf("step %d: String() differs from the model", step)
				}
			}
			for i := range model {
				check(-1, i)
			}
			if m.String() != strings.Join(model, "\r") {
				t.Fatal("String() differs from the model")
			}
			if m.Raw() != text {
				t.Error("Raw() changed after edits")
			}
			if got := len(m.AllSegments("ZAP")); got != strings.Count(strings.Join(model, "\r"), "ZAP|") {
				t.Errorf("AllSegments(ZAP) = %d", got)
			}
		})
	}
}

// TestConcurrentReadsOfManySegments reads every field of a message with
// more segments than the field cache holds from several goroutines in
// different orders, so they evict each other's cache entries; every read
// must match a serial read of a fresh parse (run with -race).
func TestConcurrentReadsOfManySegments(t *testing.T) {
	text := manySegments(400, "\r")
	want := readEverything(mustParse(t, text), 0, 1)
	m := mustParse(t, text)
	var wg sync.WaitGroup
	got := make([]string, 6)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[g] = readEverything(m, g*37, 2*g+1) // stride is odd, so coprime with 401
		}()
	}
	wg.Wait()
	for g := range got {
		if got[g] != want {
			t.Errorf("goroutine %d read a different message", g)
		}
	}
}

// readEverything returns every field of every segment of m, visiting the
// segments from start by stride modulo their number, sorted back into
// message order.
func readEverything(m *Message, start, stride int) string {
	n := m.NumSegments()
	out := make([]string, n)
	for j, i := 0, start%n; j < n; j, i = j+1, (i+stride)%n {
		s, _ := m.SegmentAt(i)
		var b strings.Builder
		for k := 0; k <= s.FieldCount(); k++ {
			b.WriteString(s.Field(k).Component(1, Whole, 0))
			b.WriteByte(',')
		}
		out[i] = b.String()
	}
	return strings.Join(out, "\n")
}

// TestReadingKeepsTheFieldCacheBounded reads a field of every segment of a
// message of tiny segments: the field boundaries of at most maxCache
// segments stay reachable, so the message still keeps ≤ 4× its text.
func TestReadingKeepsTheFieldCacheBounded(t *testing.T) {
	text := `MSH|^~\&|A` + strings.Repeat("\rZ|1", 262_000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := mustParse(t, text)
	for i := 0; i < m.NumSegments(); i++ {
		s, _ := m.SegmentAt(i)
		if i > 0 && s.Field(1).String() != "1" {
			t.Fatalf("segment %d: Z-1 = %q", i, s.Field(1).String())
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(m)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if limit := int64(4*len(text) + 64<<10); kept > limit {
		t.Errorf("after reading every segment the message keeps %d bytes for %d bytes of text (%.1f×), want ≤ 4×",
			kept, len(text), float64(kept)/float64(len(text)))
	}
}

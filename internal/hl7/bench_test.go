package hl7

import (
	"sort"
	"testing"
)

// corpus returns the testdata samples in a fixed order and their total size.
func corpus(b *testing.B) ([]string, int64) {
	b.Helper()
	all := samples(b)
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	texts := make([]string, len(names))
	var size int64
	for i, n := range names {
		texts[i] = all[n]
		size += int64(len(all[n]))
	}
	return texts, size
}

func BenchmarkParse(b *testing.B) {
	texts, size := corpus(b)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		for _, text := range texts {
			if _, err := Parse(text); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkParseReadAllSerialize is the workload compared with @medplum/core
// (~16 MB/s on Node 20): parse, read every component of every repetition of
// every field, serialise.
func BenchmarkParseReadAllSerialize(b *testing.B) {
	benchParseReadSerialize(b, readAll)
}

// BenchmarkParseReadAllByIndexSerialize is the same workload reading
// components with Component(c, Whole, r), as ported Medplum code would.
func BenchmarkParseReadAllByIndexSerialize(b *testing.B) {
	benchParseReadSerialize(b, readAllByIndex)
}

// benchParseReadSerialize parses the corpus, reads every segment with read,
// and serialises each message again.
func benchParseReadSerialize(b *testing.B, read func(Segment) int) {
	texts, size := corpus(b)
	b.SetBytes(size)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for _, text := range texts {
			m, err := Parse(text)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < m.NumSegments(); i++ {
				s, _ := m.SegmentAt(i)
				n += read(s)
			}
			n += len(m.String())
		}
	}
	if n == 0 {
		b.Fatal("read nothing")
	}
}

func BenchmarkParseLargeORU(b *testing.B) {
	text := readSample(b, "oru_r01_large.hl7")
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := Parse(text)
		if err != nil {
			b.Fatal(err)
		}
		_ = m.String()
	}
}

func BenchmarkBuildAck(b *testing.B) {
	m := mustParse(b, readSample(b, "adt_a01.hl7"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.BuildAck(AckOptions{Code: AE}); err != nil {
			b.Fatal(err)
		}
	}
}

package hl7

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readSample returns a file from testdata.
func readSample(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// samples returns every *.hl7 file in testdata by name.
func samples(t testing.TB) map[string]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", "*.hl7"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no samples in testdata: %v", err)
	}
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[filepath.Base(n)] = readSample(t, filepath.Base(n))
	}
	return out
}

var lineBreaks = regexp.MustCompile(`[\r\n]+`)

// canonical is the expected String() of text: its non-empty lines joined
// with CR, computed independently of the parser.
func canonical(text string) string {
	return strings.Trim(lineBreaks.ReplaceAllString(text, "\r"), "\r")
}

func mustParse(t testing.TB, text string) *Message {
	t.Helper()
	m, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return m
}

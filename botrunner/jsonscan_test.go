package botrunner

import (
	"testing"
	"unicode/utf8"
)

// checkQuickScan fails when quickScanJSON and encoding/json's path (scanJSONStd) disagree on
// body: whether it is accepted and, if it is, what is learnt from it. A body quickScanJSON
// accepts wrongly would reach the decoder, which trusts it.
func checkQuickScan(t *testing.T, body []byte) {
	t.Helper()
	if !utf8.Valid(body) {
		return // parseBody refuses it before either scan
	}
	got, ok := quickScanJSON(body)
	want, err := scanJSONStd(body)
	if ok != (err == nil) {
		t.Fatalf("%q: quickScanJSON ok=%v, encoding/json's path: %v", body, ok, err)
	}
	if ok && got != want {
		t.Fatalf("%q: quickScanJSON learnt %+v, encoding/json's path %+v", body, got, want)
	}
}

func TestQuickScanJSONAgreesWithEncodingJSON(t *testing.T) {
	n := 0
	for _, doc := range jsonCorpus(t) {
		jsonVariants(doc, func(b []byte) {
			n++
			checkQuickScan(t, b)
		})
	}
	t.Logf("%d bodies", n)
}

// FuzzQuickScanJSON compares quickScanJSON with encoding/json's path on arbitrary bodies.
func FuzzQuickScanJSON(f *testing.F) {
	for _, doc := range jsonCorpus(f) {
		f.Add(doc)
	}
	f.Fuzz(checkQuickScan)
}

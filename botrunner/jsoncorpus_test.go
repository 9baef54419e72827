package botrunner

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// jsonCorpus is JSON the differential tests of the input path run on: the bench inputs, the
// e2e FHIR seed (each resource, and the whole array), the JSON bodies of FuzzParseInput's
// corpus, and hostile documents — deep nesting, duplicate and __proto__ keys, escapes, lone
// surrogates, big and odd numbers, invalid UTF-8 — and broken ones.
func jsonCorpus(t testing.TB) [][]byte {
	t.Helper()
	var docs [][]byte
	for _, name := range []string{"testdata/input/patient.json", "testdata/input/scenario3.json", "../internal/e2e/testdata/diffbots/seed.json"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	docs = append(docs, fuzzCorpusBodies(t, "testdata/fuzz/FuzzParseInput")...)
	for _, s := range hostileJSON {
		docs = append(docs, []byte(s))
	}
	return docs
}

var hostileJSON = []string{
	strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth),
	strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1),
	strings.Repeat(`{"a":`, MaxJSONDepth) + "1" + strings.Repeat("}", MaxJSONDepth),
	strings.Repeat(`{"a":`, MaxJSONDepth+1) + "1" + strings.Repeat("}", MaxJSONDepth+1),
	strings.Repeat(`[{"a":`, MaxJSONDepth/2) + "[]" + strings.Repeat("}]", MaxJSONDepth/2),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	`{"a":1,"b":2,"a":3}`,
	`{"resourceType":"Patient","resourceType":"Observation"}`,
	`{"resourceType":"Patient","resourceType":1}`,
	`{"resourceType":1,"resourceType":"Patient"}`,
	`{"resourceType":"Pati\u0065nt"}`,
	`{"resource\u0054ype":"Bundle","meta":{"resourceType":"x"}}`,
	`{"resourceTyp\u0065":null}`,
	`{"resourceType":{"resourceType":"Patient"}}`,
	`{"resourceType":["Patient"]}`,
	`{"__proto__":{"polluted":true},"constructor":{"prototype":{}},"toString":1,"hasOwnProperty":null}`,
	`{"__proto__":1,"__proto__":[2]}`,
	`{"2":"b","1":"a","x":0,"0":"z","4294967295":"n","-1":"m","01":"o"}`,
	`{"a\"b":1,"a\\u0041":2,"\u00e9t\u00e9":3,"été":4,"":5,"\/":6,"\b\f\n\r\t":7}`,
	`["\ud800","\udc00","\ud83d\ude00","\ud83d","x\ud800y","\u0000","\u001f","\uFFFF","\uFEFF"]`,
	`{"\ud800":1,"\ud800x":2}`,
	`["é","日本語","😀","` + "\u2028\u2029" + `"]`,
	`[0,-0,1,-1,0.5,-0.0,1e3,1E+3,1e-3,123456789012345678901234567890,1e308,1e309,-1e309,4.9e-324,1e-400,9007199254740993,0.1,2.5e-5]`,
	`[1.0,100,1e2,-0e0,0.000001,1e21,123456789,2147483648,-2147483649]`,
	`[true,false,null,[],{},[[]],[{}],{"":{}}]`,
	" \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" : { } } \r\n",
	"\ufeff{}",
	"{}",
	"[]",
	`{"a":"` + strings.Repeat("x", 300) + `"}`,
	`{"` + strings.Repeat("k", 40) + `":"` + strings.Repeat("v", 16) + `","` + strings.Repeat("w", 17) + `":1}`,
	// invalid
	``, ` `, `{`, `[`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a" 1}`,
	`{"a":1 "b":2}`, `[1 2]`, `{} {}`, `[] x`, `{"a":01}`, `[-]`, `[1.]`, `[.5]`, `[1e]`, `[1e+]`,
	`[+1]`, `[0x10]`, `[NaN]`, `[Infinity]`, `[tru]`, `[nul]`, `[falsey]`, `["\x"]`, `["\u12"]`,
	`["\u12g4"]`, "[\"a\tb\"]", "[\"a\nb\"]", "[\"\x00\"]", `["abc`, `["abc\"]`, `{"a":1}}`,
	`[1]]`, `{'a':1}`, `{a:1}`, "{\"a\":1}\x00", `[1,2,3`, `{"a":[1,2}`, `{"a":{"b":1]}`,
	"[\"\xff\"]", "{\"\xc3\":1}", "[\"\xed\xa0\x80\"]", "\xef\xbb\xbf\xef\xbb\xbf{}",
	`{"a":1,"b":x}`, `{"resourceType":}`, `["\/\"\\\b\f\n\r\t\u0041\uD834\uDD1E"]`, `[-01]`, `[-a]`,
	`[1e5.5]`, `[1.5e]`, `["\u`, `["\`, `[t`, `[-`, `[1.`, `[1e`, `[1e-`,
}

// fuzzCorpusBodies reads the []byte argument of each file of a Go fuzz corpus directory.
func fuzzCorpusBodies(t testing.TB, dir string) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(b) {
			quoted, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("[]byte("))
			if !ok {
				continue
			}
			s, err := strconv.Unquote(string(bytes.TrimSuffix(quoted, []byte(")"))))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, []byte(s))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no bodies in %s", dir)
	}
	return out
}

// jsonVariants are doc and what a body near it looks like: its prefixes (truncated input; some
// 500 of a long document), and, for small documents, each byte replaced by one that often
// breaks or changes JSON.
func jsonVariants(doc []byte, yield func([]byte)) {
	yield(doc)
	for n := 0; n < len(doc); n += max(1, len(doc)/500) {
		yield(doc[:n])
	}
	if len(doc) > 400 {
		return
	}
	buf := make([]byte, len(doc))
	for i := range doc {
		for _, c := range []byte(`{}[],:"\ 0-.eEu1tn`) {
			copy(buf, doc)
			buf[i] = c
			yield(buf)
		}
	}
}

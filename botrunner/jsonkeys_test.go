package botrunner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// TestJSONValueWithKeyCacheMatchesJSONParse decodes inputs twice on one execution (the second
// time from the key cache) and compares each with JSON.parse of the same text: the keys, their
// order, own-property-ness and values.
func TestJSONValueWithKeyCacheMatchesJSONParse(t *testing.T) {
	x := &execution{rt: goja.New()}
	inputs := []string{
		`{"resourceType":"Patient","id":"1","name":[{"given":["A"],"family":"B"}]}`,
		`{"a\"b":1,"a\\u0041":2,"\u00e9t\u00e9":3,"été":4,"":5}`,
		`{"dup":1,"dup":2,"__proto__":{"x":1},"constructor":"c"}`,
		`{"` + strings.Repeat("k", maxJSONKeyLen+1) + `":true,"short":null}`,
		`[{"id":"1"},{"id":"2","id":"3"},[],{}]`,
	}
	check := func(in string) {
		t.Helper()
		x.rt.Set("decoded", x.jsonValue([]byte(in)))
		x.rt.Set("text", in)
		v, err := x.rt.RunString(`(() => {
			const describe = (v) => JSON.stringify(v, (k, o) => o && typeof o === 'object' && !Array.isArray(o)
				? Object.getOwnPropertyNames(o).map((n) => [n, Object.getOwnPropertyDescriptor(o, n).enumerable, o[n]])
				: o);
			return describe(decoded) === describe(JSON.parse(text)) ? '' : describe(decoded) + ' != ' + describe(JSON.parse(text));
		})()`)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if s := v.String(); s != "" {
			t.Errorf("%s: %s", in, s)
		}
	}
	for round := 0; round < 2; round++ {
		for _, in := range inputs {
			check(in)
		}
	}
	if _, ok := x.jsonKeys[strings.Repeat("k", maxJSONKeyLen+1)]; ok {
		t.Errorf("a key longer than %d bytes was cached", maxJSONKeyLen)
	}
	if _, ok := x.jsonKeys["resourceType"]; !ok {
		t.Errorf("resourceType was not cached: %v", x.jsonKeys)
	}
	// Many distinct keys: the cache stays bounded and decoding stays right.
	var b strings.Builder
	b.WriteString("{")
	for i := range 2 * maxJSONKeys {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	b.WriteString(`"last":0}`)
	check(b.String())
	if len(x.jsonKeys) > maxJSONKeys {
		t.Errorf("%d keys cached, more than %d", len(x.jsonKeys), maxJSONKeys)
	}
}

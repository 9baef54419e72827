package botrunner

import (
	"testing"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// sameJSValues is JavaScript that compares two decoded values as a bot could tell them apart:
// typeof, Object.is for primitives (-0, big numbers, strings code unit by code unit), and for
// objects the prototype, array-ness, extensibility, the own keys in order and each property's
// descriptor. It returns "" or where they differ.
const sameJSValues = `(function (decoded, want) {
	const same = (a, b, path) => {
		if (typeof a !== typeof b) return path + ': typeof ' + typeof a + ' vs ' + typeof b;
		if (a === null || typeof a !== 'object') return Object.is(a, b) ? '' : path + ': ' + JSON.stringify(a) + ' vs ' + JSON.stringify(b);
		if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return path + ': prototype';
		if (Array.isArray(a) !== Array.isArray(b)) return path + ': array-ness';
		if (Object.isExtensible(a) !== Object.isExtensible(b)) return path + ': extensibility';
		const ka = Reflect.ownKeys(a), kb = Reflect.ownKeys(b);
		if (ka.length !== kb.length) return path + ': keys ' + JSON.stringify(ka) + ' vs ' + JSON.stringify(kb);
		for (let i = 0; i < ka.length; i++) {
			const p = path + '[' + JSON.stringify(ka[i]) + ']';
			if (ka[i] !== kb[i]) return p + ': key ' + JSON.stringify(kb[i]) + ' expected';
			const da = Object.getOwnPropertyDescriptor(a, ka[i]), db = Object.getOwnPropertyDescriptor(b, kb[i]);
			for (const f of ['writable', 'enumerable', 'configurable', 'get', 'set']) {
				if (da[f] !== db[f]) return p + ': ' + f;
			}
			const r = same(da.value, db.value, p);
			if (r) return r;
		}
		return '';
	};
	return same(decoded, want, '');
})`

// decodeChecker returns a function that decodes a document with x.jsonValue and fails the test
// unless the value is the same as what want makes of the document (nil: its text not valid for
// want).
func decodeChecker(tb testing.TB, x *execution, want func(doc []byte) goja.Value) func(t testing.TB, doc []byte) {
	tb.Helper()
	v, err := x.rt.RunString(sameJSValues)
	if err != nil {
		tb.Fatal(err)
	}
	same, _ := goja.AssertFunction(v)
	return func(t testing.TB, doc []byte) {
		t.Helper()
		w := want(doc)
		if w == nil {
			return
		}
		got, err := same(goja.Undefined(), x.jsonValue(doc), w)
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if s := got.String(); s != "" {
			t.Fatalf("%q decodes unlike the reference at %s", doc, s)
		}
	}
}

// reference is encoding/json's tokenizer building the same values (refJSONValue), in x's runtime.
func reference(x *execution) func(doc []byte) goja.Value {
	return func(doc []byte) goja.Value { return refJSONValue(x, doc) }
}

// jsonParse is goja's JSON.parse in x's runtime; nil where it throws (numbers beyond float64).
func jsonParse(t *testing.T, x *execution) func(doc []byte) goja.Value {
	parse, _ := goja.AssertFunction(x.rt.Get("JSON").ToObject(x.rt).Get("parse"))
	return func(doc []byte) goja.Value {
		v, err := parse(goja.Undefined(), x.rt.ToValue(string(doc)))
		if err != nil {
			t.Logf("JSON.parse refuses %.60q: %v", doc, err)
			return nil
		}
		return v
	}
}

// TestJSONValueMatchesReference decodes every valid document of the corpus and its variants on
// one warm instance, the corpus's documents twice (the second time with their keys and strings
// cached), and compares each with the reference decoder; the corpus's documents also with
// JSON.parse, and on a runtime that serves one run.
func TestJSONValueMatchesReference(t *testing.T) {
	x := &execution{rt: goja.New(), pooled: true}
	check, checkParse := decodeChecker(t, x, reference(x)), decodeChecker(t, x, jsonParse(t, x))
	fresh := &execution{rt: goja.New()} // a runtime for one run: no string table
	checkFresh := decodeChecker(t, fresh, reference(fresh))
	n := 0
	for _, doc := range jsonCorpus(t) {
		if decodable(doc) {
			checkParse(t, doc)
			check(t, doc)
			checkFresh(t, doc)
		}
		jsonVariants(doc, func(b []byte) {
			if decodable(b) {
				n++
				check(t, b)
			}
		})
	}
	t.Logf("%d documents", n)
}

// decodable says whether the runner would decode doc: valid UTF-8 and JSON.
func decodable(doc []byte) bool {
	if !utf8.Valid(doc) {
		return false
	}
	_, err := scanJSON(doc)
	return err == nil
}

// FuzzJSONValue compares the decoder with the reference decoder on whatever JSON body the
// runner accepts.
func FuzzJSONValue(f *testing.F) {
	for _, doc := range jsonCorpus(f) {
		f.Add(doc)
	}
	x := &execution{rt: goja.New(), pooled: true} // one warm instance for all the inputs
	check := decodeChecker(f, x, reference(x))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := ParseInput(MediaJSON, body)
		if err != nil {
			return
		}
		check(t, in.JSON)
		check(t, in.JSON)
	})
}

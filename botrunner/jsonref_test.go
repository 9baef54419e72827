package botrunner

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/dop251/goja"
)

// refJSONValue decodes b with encoding/json's tokenizer, a decoder that shares none of
// jsonValue's scanning, into JavaScript values built as jsonValue builds them (dataObject: own
// data properties, the last of a repeated key winning; arrays; strings as encoding/json decodes
// them; numbers through ParseFloat). It is the reference where goja's JSON.parse differs from
// what bots get: JSON.parse refuses numbers beyond float64's range, which decode to ±Infinity.
// b must be a document the runner accepts (valid UTF-8 and JSON).
func refJSONValue(x *execution, b []byte) goja.Value {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var value func() goja.Value
	value = func() goja.Value {
		tok, _ := dec.Token()
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' {
				obj := x.newDataObject()
				for dec.More() {
					key, _ := dec.Token()
					obj.add(key.(string), value())
				}
				_, _ = dec.Token() // '}'
				return obj.done(x)
			}
			var items []any
			for dec.More() {
				items = append(items, value())
			}
			_, _ = dec.Token() // ']'
			return x.rt.NewArray(items...)
		case string:
			return x.rt.ToValue(t)
		case json.Number:
			f, _ := strconv.ParseFloat(string(t), 64) // ±Inf beyond float64's range, as jsonValue
			return x.rt.ToValue(f)
		case bool:
			return x.rt.ToValue(t)
		}
		return goja.Null()
	}
	return value()
}

package botrunner

import (
	"encoding/json"
	"strconv"

	"github.com/dop251/goja"
)

// refJSONValue is the JSON-to-JavaScript decoder as it was before the input path was tuned for
// issues 18 and 24 (every key and string through encoding/json's rules when escaped, arrays
// through []any and Runtime.NewArray, numbers through ParseFloat): the reference the tuned
// decoder is compared with, value for value, where goja's JSON.parse differs from what bots
// have been getting (it refuses numbers beyond float64's range, which decode to ±Infinity).
func refJSONValue(x *execution, b []byte) goja.Value {
	d := refJSONDecoder{x: x, b: b}
	return d.value()
}

type refJSONDecoder struct {
	x *execution
	b []byte
	i int
}

func (d *refJSONDecoder) skipSpace() {
	for d.i < len(d.b) && (d.b[d.i] == ' ' || d.b[d.i] == '\t' || d.b[d.i] == '\r' || d.b[d.i] == '\n') {
		d.i++
	}
}

func (d *refJSONDecoder) value() goja.Value {
	rt := d.x.rt
	d.skipSpace()
	switch d.b[d.i] {
	case '{':
		d.i++
		obj := d.x.newDataObject()
		for {
			d.skipSpace()
			switch d.b[d.i] {
			case '}':
				d.i++
				return obj.done(d.x)
			case ',':
				d.i++
				d.skipSpace()
			}
			key := d.str()
			d.skipSpace()
			d.i++ // ':'
			obj.add(key, d.value())
		}
	case '[':
		d.i++
		var items []any
		for {
			d.skipSpace()
			switch d.b[d.i] {
			case ']':
				d.i++
				return rt.NewArray(items...)
			case ',':
				d.i++
			}
			items = append(items, d.value())
		}
	case '"':
		return rt.ToValue(d.str())
	case 't':
		d.i += 4
		return rt.ToValue(true)
	case 'f':
		d.i += 5
		return rt.ToValue(false)
	case 'n':
		d.i += 4
		return goja.Null()
	}
	start := d.i
	for d.i < len(d.b) && (d.b[d.i] == '-' || d.b[d.i] == '+' || d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E' || isDigit(d.b[d.i])) {
		d.i++
	}
	f, _ := strconv.ParseFloat(string(d.b[start:d.i]), 64)
	return rt.ToValue(f)
}

func (d *refJSONDecoder) str() string {
	start := d.i
	for d.i++; d.b[d.i] != '"'; d.i++ {
		if d.b[d.i] == '\\' {
			d.i++
		}
	}
	d.i++
	var s string
	_ = json.Unmarshal(d.b[start:d.i], &s)
	return s
}

package botrunner

import (
	"encoding/json"
	"sort"
	"strconv"

	"github.com/dop251/goja"
)

// jsonValue converts JSON that ParseInput (or json.Marshal) already validated into JavaScript
// values, with JSON.parse's semantics. It is several times faster than goja's JSON.parse, which
// goes through encoding/json's token API. Nesting depth is bounded by validation (MaxJSONDepth).
func (x *execution) jsonValue(b []byte) goja.Value {
	d := jsonDecoder{x: x, rt: x.rt, b: b}
	return d.value()
}

type jsonDecoder struct {
	x  *execution
	rt *goja.Runtime
	b  []byte
	i  int
}

func (d *jsonDecoder) skipSpace() { d.i = skipJSONSpace(d.b, d.i) }

func (d *jsonDecoder) value() goja.Value {
	d.skipSpace()
	switch d.b[d.i] {
	case '{':
		d.i++
		obj := d.x.newDataObject()
		for {
			d.skipSpace()
			if d.b[d.i] == '}' {
				d.i++
				return obj.done(d.x)
			}
			if d.b[d.i] == ',' {
				d.i++
				d.skipSpace()
			}
			key := d.key()
			d.skipSpace()
			d.i++ // ':'
			obj.add(key, d.value())
			d.skipSpace()
		}
	case '[':
		d.i++
		var items []any
		for {
			d.skipSpace()
			if d.b[d.i] == ']' {
				d.i++
				return d.rt.NewArray(items...)
			}
			if d.b[d.i] == ',' {
				d.i++
			}
			items = append(items, d.value())
		}
	case '"':
		return d.strValue()
	case 't':
		d.i += 4
		return d.rt.ToValue(true)
	case 'f':
		d.i += 5
		return d.rt.ToValue(false)
	case 'n':
		d.i += 4
		return goja.Null()
	default:
		start := d.i
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case '-', '+', '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
				d.i++
				continue
			}
			break
		}
		f, _ := strconv.ParseFloat(string(d.b[start:d.i]), 64) // validated; ±Inf on overflow, as JSON.parse
		return d.rt.ToValue(f)
	}
}

// strValue reads the string literal at d.i as a JavaScript string.
func (d *jsonDecoder) strValue() goja.Value {
	start := d.i
	for j := start + 1; j < len(d.b); j++ {
		switch d.b[j] {
		case '\\':
			return d.rt.ToValue(d.str())
		case '"':
			d.i = j + 1
			return d.stringValue(d.b[start+1 : j])
		}
	}
	return d.rt.ToValue(d.str())
}

// str reads the string literal at d.i.
func (d *jsonDecoder) str() string {
	start := d.i
	escaped := false
	for d.i++; d.i < len(d.b); d.i++ {
		switch d.b[d.i] {
		case '\\':
			escaped = true
			d.i++
		case '"':
			d.i++
			if !escaped {
				return string(d.b[start+1 : d.i-1])
			}
			var s string
			_ = json.Unmarshal(d.b[start:d.i], &s)
			return s
		}
	}
	return ""
}

// stringMap converts a Go map into a JavaScript object with keys in sorted order.
func (x *execution) stringMap(m map[string]string) *goja.Object {
	obj := x.newDataObject()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		obj.add(k, x.rt.ToValue(m[k]))
	}
	return obj.done(x)
}

package botrunner

import (
	"bytes"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// Buffer's methods that take strings in an encoding, where Uint8Array's (which a Buffer would
// otherwise inherit) take only numbers and would answer wrongly: write, fill, indexOf,
// lastIndexOf and includes.
func (x *execution) bufferStringMethods(proto *goja.Object) {
	rt := x.rt
	_ = proto.Set("write", x.fn("write", func(c goja.FunctionCall) goja.Value {
		b := x.bytesArg(c.This, "this")
		if !goja.IsString(c.Argument(0)) {
			x.argTypeError("string", "of type string", c.Argument(0))
		}
		// write(string[, offset[, length]][, encoding]): the encoding may come at any place.
		enc, args := trailingEncoding(c.Arguments[1:], 0)
		offset, length := int64(0), int64(len(b))
		if len(args) > 0 && !goja.IsUndefined(args[0]) {
			offset = args[0].ToInteger()
		}
		if offset < 0 || offset > int64(len(b)) {
			panic(x.outOfRange("offset", args[0]))
		}
		length = int64(len(b)) - offset
		if len(args) > 1 && !goja.IsUndefined(args[1]) {
			length = min(args[1].ToInteger(), length)
			if length < 0 {
				panic(x.outOfRange("length", args[1]))
			}
		}
		e := x.encodingArg(enc)
		data := encodeString(c.Argument(0).String(), e)
		n := min(int64(len(data)), length)
		if e == "utf8" && n < int64(len(data)) {
			// Node writes no partial character.
			for n > 0 && !utf8.RuneStart(data[n]) {
				n--
			}
		}
		if e == "utf16le" {
			n &^= 1
		}
		copy(b[offset:], data[:n])
		return rt.ToValue(n)
	}))
	_ = proto.Set("fill", x.fn("fill", func(c goja.FunctionCall) goja.Value {
		b := x.bytesArg(c.This, "this")
		// fill(value[, offset[, end]][, encoding])
		enc, args := trailingEncoding(c.Arguments, 1)
		start, end := int64(0), int64(len(b))
		if len(args) > 1 && !goja.IsUndefined(args[1]) {
			start = args[1].ToInteger()
		}
		if len(args) > 2 && !goja.IsUndefined(args[2]) {
			end = args[2].ToInteger()
		}
		if start < 0 || end > int64(len(b)) || start > end {
			panic(x.outOfRange("offset", rt.ToValue(start)))
		}
		var pattern []byte
		switch v := c.Argument(0); {
		case goja.IsString(v):
			pattern = encodeString(v.String(), x.encodingArg(enc))
			if len(pattern) == 0 {
				pattern = []byte{0}
			}
		default:
			if p, ok := x.bufferBytes(v); ok {
				pattern = append([]byte(nil), p...)
			} else {
				pattern = []byte{byte(v.ToInteger())}
			}
		}
		if len(pattern) == 0 {
			panic(x.newError("TypeError", "The argument 'value' is invalid. Received an empty buffer"))
		}
		for i := start; i < end; i += int64(copy(b[i:end], pattern)) {
		}
		return c.This
	}))
	search := func(name string, last bool, answer func(i int) goja.Value) {
		_ = proto.Set(name, x.fn(name, func(c goja.FunctionCall) goja.Value {
			b := x.bytesArg(c.This, "this")
			// indexOf(value[, byteOffset][, encoding])
			enc := c.Argument(2)
			from := goja.Value(goja.Undefined())
			if a := c.Argument(1); goja.IsString(a) {
				enc = a
			} else {
				from = a
			}
			var needle []byte
			switch v := c.Argument(0); {
			case goja.IsString(v):
				needle = encodeString(v.String(), x.encodingArg(enc))
			case goja.IsNumber(v):
				needle = []byte{byte(v.ToInteger())}
			default:
				needle = x.bytesArg(v, "value")
			}
			n := int64(len(b))
			var i int
			if last {
				off := n
				if !goja.IsUndefined(from) {
					off = from.ToInteger()
					if off < 0 {
						off += n
					}
				}
				if off < 0 {
					return answer(-1)
				}
				stop := min(off+int64(len(needle)), n)
				i = bytes.LastIndex(b[:stop], needle)
			} else {
				off := int64(0)
				if !goja.IsUndefined(from) {
					off = from.ToInteger()
					if off < 0 {
						off = max(off+n, 0)
					}
				}
				if off > n {
					return answer(-1)
				}
				if i = bytes.Index(b[off:], needle); i >= 0 {
					i += int(off)
				}
			}
			return answer(i)
		}))
	}
	search("indexOf", false, func(i int) goja.Value { return rt.ToValue(i) })
	search("lastIndexOf", true, func(i int) goja.Value { return rt.ToValue(i) })
	search("includes", false, func(i int) goja.Value { return rt.ToValue(i >= 0) })
}

// outOfRange is Node's RangeError for an argument outside the buffer.
func (x *execution) outOfRange(name string, v goja.Value) *goja.Object {
	e := x.newError("RangeError", `The value of "`+name+`" is out of range. Received `+x.formatValue(v, false))
	_ = e.Set("code", "ERR_OUT_OF_RANGE")
	return e
}

// trailingEncoding splits an encoding, a string last in args after the first keep, from the
// arguments before it.
func trailingEncoding(args []goja.Value, keep int) (goja.Value, []goja.Value) {
	if n := len(args); n > keep && goja.IsString(args[n-1]) {
		return args[n-1], args[:n-1]
	}
	return goja.Undefined(), args
}

package botrunner

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/dop251/goja"
	"github.com/dop251/goja_nodejs/buffer"
)

// Buffer is goja_nodejs's (a Uint8Array subclass with Node's read and write methods) with what
// it lacks or gets wrong made as Node's: the encodings latin1/binary, ascii, base64url and
// utf16le, an unknown encoding as a TypeError, byteLength, isBuffer, isEncoding, compare,
// allocUnsafe, toJSON, and slice sharing memory as subarray does. It is evaluated without
// goja_nodejs's require registry, whose default loader reads the host filesystem.

// maxBufferBytes bounds one Buffer.alloc, so a bot cannot ask Go for a huge allocation in one
// native call, which the heap watchdog could not stop (Node's own limit is 4 GiB).
const maxBufferBytes = 256 << 20

func (x *execution) bufferModule() *goja.Object {
	if x.lazy.buffer != nil {
		return x.lazy.buffer
	}
	rt := x.rt
	module := rt.NewObject()
	exports := rt.NewObject()
	_ = module.Set("exports", exports)
	buffer.Require(rt, module)
	libCtor := exports.Get("Buffer").(*goja.Object)
	proto := libCtor.Get("prototype").(*goja.Object)
	x.lazy.bufferCtor = libCtor // newBuffer constructs through it: instances get proto either way
	libFrom, _ := goja.AssertFunction(libCtor.Get("from"))
	libConcat, _ := goja.AssertFunction(libCtor.Get("concat"))
	// goja names native functions after their Go functions; stack traces and .name show these.
	nameAfterKeys(rt, proto, "")

	from := func(args []goja.Value) *goja.Object {
		a := goja.Undefined()
		if len(args) > 0 {
			a = args[0]
		}
		if s, ok := a.Export().(string); ok && goja.IsString(a) {
			enc := goja.Undefined()
			if len(args) > 1 {
				enc = args[1]
			}
			return x.newBuffer(encodeString(s, x.encodingArg(enc)))
		}
		// The library makes an array-like's bytes in one allocation of its length, which a bot
		// can set to anything: bound it as alloc is.
		if o, ok := a.(*goja.Object); ok {
			if _, isBytes := x.bufferBytes(o); !isBytes {
				if l := o.Get("length"); l != nil && l.ToFloat() > maxBufferBytes {
					panic(x.bufferTooLarge(l))
				}
			}
		}
		v, err := libFrom(libCtor, args...)
		if err != nil {
			panic(err)
		}
		return v.(*goja.Object)
	}
	var alloc goja.Value
	// The library's constructor does not take a size and, called as subarray and slice call it
	// (with an ArrayBuffer), is from: this one is Node's deprecated new Buffer(size | value).
	ctor := rt.ToValue(func(c goja.ConstructorCall) *goja.Object {
		if goja.IsNumber(c.Argument(0)) {
			fn, _ := goja.AssertFunction(alloc)
			v, err := fn(goja.Undefined(), c.Argument(0))
			if err != nil {
				panic(err)
			}
			return v.(*goja.Object)
		}
		return from(c.Arguments)
	}).(*goja.Object)
	_ = ctor.SetPrototype(libCtor.Prototype())
	_ = ctor.DefineDataProperty("prototype", proto, goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE)
	_ = ctor.DefineDataProperty("name", rt.ToValue("Buffer"), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = proto.DefineDataProperty("constructor", ctor, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = ctor.Set("poolSize", 8192)
	_ = ctor.Set("from", x.fn("from", func(c goja.FunctionCall) goja.Value { return from(c.Arguments) }))
	_ = ctor.Set("concat", x.fn("concat", func(c goja.FunctionCall) goja.Value {
		// The library allocates the total at once; the list may name one big buffer many times.
		total := 0.0
		if l, ok := c.Argument(0).(*goja.Object); ok {
			rt.ForOf(l, func(v goja.Value) bool {
				if b, ok := x.bufferBytes(v); ok {
					total += float64(len(b))
				}
				return total <= maxBufferBytes
			})
		}
		if n := c.Argument(1); !goja.IsUndefined(n) {
			total = n.ToFloat()
		}
		if total > maxBufferBytes {
			panic(x.bufferTooLarge(rt.ToValue(total)))
		}
		v, err := libConcat(ctor, c.Arguments...)
		if err != nil {
			panic(err)
		}
		return v
	}))
	_ = exports.Set("Buffer", ctor)
	alloc = x.fn("alloc", func(c goja.FunctionCall) goja.Value {
		size := c.Argument(0)
		if !goja.IsNumber(size) || size.ToFloat() < 0 || size.ToFloat() > maxBufferBytes {
			panic(x.bufferTooLarge(size))
		}
		b := make([]byte, size.ToInteger())
		switch fill := c.Argument(1); {
		case goja.IsString(fill):
			if f := encodeString(fill.String(), x.encodingArg(c.Argument(2))); len(f) > 0 {
				for i := 0; i < len(b); i += copy(b[i:], f) {
				}
			}
		case !goja.IsUndefined(fill):
			if f := fill.ToInteger(); f != 0 {
				for i := range b {
					b[i] = byte(f)
				}
			}
		}
		return x.newBuffer(b)
	})
	_ = ctor.Set("alloc", alloc)
	_ = ctor.Set("allocUnsafe", alloc)
	_ = ctor.Set("allocUnsafeSlow", alloc)
	_ = ctor.Set("isBuffer", x.fn("isBuffer", func(c goja.FunctionCall) goja.Value {
		return rt.ToValue(rt.InstanceOf(c.Argument(0), ctor))
	}))
	_ = ctor.Set("isEncoding", x.fn("isEncoding", func(c goja.FunctionCall) goja.Value {
		return rt.ToValue(goja.IsString(c.Argument(0)) && nodeEncoding(c.Argument(0).String()) != "")
	}))
	_ = ctor.Set("byteLength", x.fn("byteLength", func(c goja.FunctionCall) goja.Value {
		if goja.IsString(c.Argument(0)) {
			return rt.ToValue(len(encodeString(c.Argument(0).String(), x.encodingArg(c.Argument(1)))))
		}
		b, ok := x.bufferBytes(c.Argument(0))
		if !ok {
			x.argTypeError("string", "string or an instance of Buffer or ArrayBuffer", c.Argument(0))
		}
		return rt.ToValue(len(b))
	}))
	_ = ctor.Set("compare", x.fn("compare", func(c goja.FunctionCall) goja.Value {
		return rt.ToValue(bytes.Compare(x.bytesArg(c.Argument(0), "buf1"), x.bytesArg(c.Argument(1), "buf2")))
	}))

	_ = proto.Set("toString", x.fn("toString", func(c goja.FunctionCall) goja.Value {
		b := x.bytesArg(c.This, "this")
		start, end := int64(0), int64(len(b))
		if a := c.Argument(1); !goja.IsUndefined(a) {
			start = min(max(a.ToInteger(), 0), end)
		}
		if a := c.Argument(2); !goja.IsUndefined(a) {
			end = min(max(a.ToInteger(), start), end)
		}
		return rt.ToValue(decodeBytes(b[start:end], x.encodingArg(c.Argument(0))))
	}))
	_ = proto.Set("toJSON", x.fn("toJSON", func(c goja.FunctionCall) goja.Value {
		b := x.bytesArg(c.This, "this")
		data := make([]any, len(b))
		for i, v := range b {
			data[i] = int64(v)
		}
		o := rt.NewObject()
		_ = o.Set("type", "Buffer")
		_ = o.Set("data", rt.NewArray(data...))
		return o
	}))
	_ = proto.Set("compare", x.fn("compare", func(c goja.FunctionCall) goja.Value {
		return rt.ToValue(bytes.Compare(x.bytesArg(c.This, "this"), x.bytesArg(c.Argument(0), "target")))
	}))
	// Node's Buffer.slice shares memory (unlike Uint8Array's), as subarray does.
	_ = proto.Set("slice", proto.Get("subarray"))
	x.bufferStringMethods(proto)

	x.lazy.buffer = exports
	return exports
}

// bufferTooLarge is the RangeError of a Buffer over maxBufferBytes (or of a size that is not one).
func (x *execution) bufferTooLarge(size goja.Value) *goja.Object {
	e := x.newError("RangeError", fmt.Sprintf(`The argument 'size' is invalid. Received %s (the sandbox allows at most %d bytes)`, x.formatValue(size, false), maxBufferBytes))
	_ = e.Set("code", "ERR_OUT_OF_RANGE")
	return e
}

func (x *execution) bufferClass() goja.Value { return x.bufferModule().Get("Buffer") }

// newBuffer wraps b (not a copy) in a Buffer.
func (x *execution) newBuffer(b []byte) *goja.Object {
	x.bufferModule()
	o, err := x.rt.New(x.lazy.bufferCtor, x.rt.ToValue(x.rt.NewArrayBuffer(b)))
	if err != nil {
		panic(err)
	}
	return o
}

// encodingArg is the canonical encoding an argument names, utf8 when undefined; an unknown one
// throws Node's TypeError.
func (x *execution) encodingArg(v goja.Value) string {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return "utf8"
	}
	enc := nodeEncoding(v.String())
	if enc == "" {
		e := x.newError("TypeError", "Unknown encoding: "+truncate(v.String(), 100))
		_ = e.Set("code", "ERR_UNKNOWN_ENCODING")
		panic(e)
	}
	return enc
}

// bytesArg is the bytes of a Buffer, typed array, DataView or ArrayBuffer argument.
func (x *execution) bytesArg(v goja.Value, name string) []byte {
	b, ok := x.bufferBytes(v)
	if !ok {
		x.argTypeError(name, "an instance of Buffer, TypedArray, DataView or ArrayBuffer", v)
	}
	return b
}

func (x *execution) argTypeError(name, what string, v goja.Value) {
	e := x.newError("TypeError", fmt.Sprintf(`The "%s" argument must be %s. Received %s`, name, what, x.formatValue(v, false)))
	_ = e.Set("code", "ERR_INVALID_ARG_TYPE")
	panic(e)
}

// nameAfterKeys gives o (when name is set) and o's function properties their JavaScript names.
func nameAfterKeys(rt *goja.Runtime, o *goja.Object, name string) {
	if name != "" {
		_ = o.DefineDataProperty("name", rt.ToValue(name), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	}
	for _, k := range o.Keys() {
		if f, ok := o.Get(k).(*goja.Object); ok {
			if _, isFn := goja.AssertFunction(f); isFn && strings.Contains(f.Get("name").String(), ".") {
				_ = f.DefineDataProperty("name", rt.ToValue(k), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
			}
		}
	}
}

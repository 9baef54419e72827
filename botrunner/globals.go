package botrunner

import (
	neturl "net/url"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja_nodejs/url"
)

// sandboxGlobals are the sandbox's globals besides require: what Medplum's vmcontext provides
// (fetch and its classes join them from fetch.go). Each is built on first use: the global object's
// prototype is a dynamic object that builds a global when a lookup reaches it and then defines
// it on the global object itself, so later lookups are ordinary. A run that never logs or parses
// a URL pays for neither.
var sandboxGlobals = map[string]func(x *execution) goja.Value{
	"console":         (*execution).newConsole,
	"URL":             (*execution).newURLClass,
	"URLSearchParams": func(x *execution) goja.Value { return x.urlModule().Get("URLSearchParams") },
	"TextEncoder":     func(x *execution) goja.Value { return x.rt.ToValue(x.newTextEncoder) },
	"TextDecoder":     func(x *execution) goja.Value { return x.rt.ToValue(x.newTextDecoder) },
	"ContentType":     func(x *execution) goja.Value { return x.coreModule().Get("ContentType") },
	"Hl7Message":      func(x *execution) goja.Value { return x.coreModule().Get("Hl7Message") },
	"Hl7Segment":      func(x *execution) goja.Value { return x.coreModule().Get("Hl7Segment") },
	"Hl7Field":        func(x *execution) goja.Value { return x.coreModule().Get("Hl7Field") },
	"Hl7Context":      func(x *execution) goja.Value { return x.coreModule().Get("Hl7Context") },

	"Buffer":          (*execution).bufferClass,
	"setTimeout":      timerGlobal("setTimeout"),
	"clearTimeout":    timerGlobal("clearTimeout"),
	"setInterval":     timerGlobal("setInterval"),
	"clearInterval":   timerGlobal("clearInterval"),
	"setImmediate":    timerGlobal("setImmediate"),
	"clearImmediate":  timerGlobal("clearImmediate"),
	"queueMicrotask":  timerGlobal("queueMicrotask"),
	"structuredClone": (*execution).newStructuredClone,
	"atob":            (*execution).newAtob,
	"btoa":            (*execution).newBtoa,
	"crypto":          func(x *execution) goja.Value { return x.webCrypto() },
	"Intl":            func(x *execution) goja.Value { return x.intl() },
}

// nodeModules are the Node built-in modules require answers, also under their "node:" names.
var nodeModules = map[string]func(x *execution) *goja.Object{
	"buffer":          (*execution).bufferModule,
	"crypto":          (*execution).cryptoModule,
	"timers":          (*execution).timersModule,
	"timers/promises": (*execution).timersPromisesModule,
}

// lazyState holds the globals and modules that are objects built on first use, so each run (or
// warm instance) builds each at most once.
type lazyState struct {
	buffer, bufferCtor *goja.Object
	webcrypto          *goja.Object
	nodeCrypto         *goja.Object
	intl               *intlState
	timers             *goja.Object
	timersPromises     *goja.Object
}

func (x *execution) installGlobals() {
	lazy := x.rt.NewDynamicObject(lazyGlobals{x})
	_ = x.rt.GlobalObject().SetPrototype(lazy)
	if x.prg.locale {
		x.installLocaleMethods()
	}
}

// lazyGlobals is the dynamic prototype of the global object (see sandboxGlobals).
type lazyGlobals struct{ x *execution }

func (g lazyGlobals) Get(key string) goja.Value {
	make := sandboxGlobals[key]
	if make == nil {
		return nil
	}
	v := make(g.x)
	g.define(key, v)
	return v
}

// Set is reached by an assignment to a global that has not been read yet.
func (g lazyGlobals) Set(key string, v goja.Value) bool {
	g.define(key, v)
	return true
}

func (g lazyGlobals) define(key string, v goja.Value) {
	_ = g.x.rt.GlobalObject().DefineDataProperty(key, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

func (g lazyGlobals) Has(key string) bool {
	_, ok := sandboxGlobals[key]
	return ok
}

func (g lazyGlobals) Delete(string) bool { return true }

// Keys is empty: like the built-in globals, these are not enumerable.
func (g lazyGlobals) Keys() []string { return nil }

// urlModule evaluates goja_nodejs's WHATWG URL module without its require registry, whose default
// loader reads the host filesystem.
func (x *execution) urlModule() *goja.Object {
	if x.urlExports == nil {
		module := x.rt.NewObject()
		x.urlExports = x.rt.NewObject()
		_ = module.Set("exports", x.urlExports)
		url.Require(x.rt, module)
	}
	return x.urlExports
}

// urlClassSource subclasses goja_nodejs's URL, whose constructor resolves a relative input
// against a base wrongly (new URL('b', 'https://h/a/x') gives https://h/b, not https://h/a/b):
// the subclass resolves with Go's net/url, as RFC 3986 says, and passes an absolute URL.
const urlClassSource = `(function (NodeURL, resolve) {
  return class URL extends NodeURL {
    constructor(input, base) {
      super(base === undefined ? input : resolve(String(input), String(base)));
    }
  };
})`

var urlClassProgram = embeddedProgram("URL", urlClassSource)

func (x *execution) newURLClass() goja.Value {
	resolve := x.fn("resolve", func(c goja.FunctionCall) goja.Value {
		input, base := c.Argument(0).String(), c.Argument(1).String()
		b, err := neturl.Parse(base)
		if err != nil || !b.IsAbs() {
			panic(x.rt.NewTypeError("Invalid base URL: " + truncate(base, 200)))
		}
		ref, err := neturl.Parse(input)
		if err != nil {
			return x.rt.ToValue(input) // let the URL constructor report it
		}
		return x.rt.ToValue(b.ResolveReference(ref).String())
	})
	return x.evalFactory(urlClassProgram(), x.urlModule().Get("URL"), resolve)
}

// newTextEncoder is the TextEncoder constructor: UTF-8 only, as the standard says.
func (x *execution) newTextEncoder(call goja.ConstructorCall) *goja.Object {
	rt := x.rt
	this := call.This
	_ = this.DefineDataProperty("encoding", rt.ToValue("utf-8"), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = this.Set("encode", func(c goja.FunctionCall) goja.Value {
		s := ""
		if a := c.Argument(0); !goja.IsUndefined(a) {
			s = a.String()
		}
		return x.newUint8Array([]byte(s))
	})
	_ = this.Set("encodeInto", func(c goja.FunctionCall) goja.Value {
		src := c.Argument(0).String()
		dst, ok := x.bufferBytes(c.Argument(1))
		if !ok {
			panic(rt.NewTypeError("TextEncoder.encodeInto: the destination must be a Uint8Array"))
		}
		read, written := 0, 0
		for _, r := range src {
			n := utf8.RuneLen(r)
			if n < 0 {
				r, n = utf8.RuneError, 3
			}
			if written+n > len(dst) {
				break
			}
			utf8.EncodeRune(dst[written:], r)
			written += n
			read++
			if r > 0xFFFF {
				read++ // counted in UTF-16 code units
			}
		}
		res := rt.NewObject()
		_ = res.Set("read", read)
		_ = res.Set("written", written)
		return res
	})
	return nil
}

// newTextDecoder is the TextDecoder constructor. Only UTF-8 is supported; fatal and ignoreBOM
// behave as the Encoding standard says.
func (x *execution) newTextDecoder(call goja.ConstructorCall) *goja.Object {
	rt := x.rt
	label := "utf-8"
	if a := call.Argument(0); !goja.IsUndefined(a) {
		label = strings.ToLower(strings.TrimSpace(a.String()))
	}
	switch label {
	case "utf-8", "utf8", "unicode-1-1-utf-8":
	default:
		panic(x.newError("RangeError", "TextDecoder: the encoding '"+label+"' is not supported (only utf-8)"))
	}
	var fatal, ignoreBOM bool
	if o, ok := call.Argument(1).(*goja.Object); ok {
		fatal = o.Get("fatal") != nil && o.Get("fatal").ToBoolean()
		ignoreBOM = o.Get("ignoreBOM") != nil && o.Get("ignoreBOM").ToBoolean()
	}
	this := call.This
	_ = this.DefineDataProperty("encoding", rt.ToValue("utf-8"), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = this.DefineDataProperty("fatal", rt.ToValue(fatal), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = this.DefineDataProperty("ignoreBOM", rt.ToValue(ignoreBOM), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = this.Set("decode", func(c goja.FunctionCall) goja.Value {
		if goja.IsUndefined(c.Argument(0)) {
			return rt.ToValue("")
		}
		b, ok := x.bufferBytes(c.Argument(0))
		if !ok {
			panic(rt.NewTypeError("TextDecoder.decode: the input must be an ArrayBuffer or an ArrayBuffer view"))
		}
		if !ignoreBOM {
			b = trimBOM(b)
		}
		if !utf8.Valid(b) {
			if fatal {
				panic(rt.NewTypeError("TextDecoder.decode: the input is not valid UTF-8"))
			}
			return rt.ToValue(strings.ToValidUTF8(string(b), "\uFFFD"))
		}
		return rt.ToValue(string(b))
	})
	return nil
}

func trimBOM(b []byte) []byte {
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		return b[3:]
	}
	return b
}

func (x *execution) newUint8Array(b []byte) goja.Value {
	o, err := x.rt.New(x.rt.Get("Uint8Array"), x.rt.ToValue(x.rt.NewArrayBuffer(b)))
	if err != nil {
		panic(err)
	}
	return o
}

// bufferBytes returns the bytes an ArrayBuffer, typed array or DataView covers (not a copy).
func (x *execution) bufferBytes(v goja.Value) ([]byte, bool) {
	o, ok := v.(*goja.Object)
	if !ok {
		return nil, false
	}
	if ab, ok := o.Export().(goja.ArrayBuffer); ok {
		return ab.Bytes(), true
	}
	buf := o.Get("buffer")
	if buf == nil {
		return nil, false
	}
	ab, ok := buf.Export().(goja.ArrayBuffer)
	if !ok {
		return nil, false
	}
	b := ab.Bytes()
	// A bot can pass any object with a buffer, so byteOffset and byteLength are any numbers:
	// compare each with what is left instead of adding them, which could overflow.
	off, n := o.Get("byteOffset").ToInteger(), o.Get("byteLength").ToInteger()
	if off < 0 || n < 0 || off > int64(len(b)) || n > int64(len(b))-off {
		return nil, false
	}
	return b[off : off+n], true
}

// newError makes a JavaScript error of a built-in class such as RangeError.
func (x *execution) newError(class, message string) *goja.Object {
	o, err := x.rt.New(x.rt.Get(class), x.rt.ToValue(message))
	if err != nil {
		panic(err)
	}
	return o
}

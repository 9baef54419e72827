package botrunner

import (
	"bytes"
	"math"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// consoleBuffer keeps the last max bytes written to it. It is locked because an abandoned run
// (see abandonGrace) may still write while Run reads the output.
type consoleBuffer struct {
	mu        sync.Mutex
	max       int
	buf       []byte
	truncated bool
}

func (c *consoleBuffer) write(prefix, line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(prefix) + len(line) + 1
	if n > c.max {
		// Only the end of this entry can survive; don't copy what will be dropped.
		c.buf = c.buf[:0]
		c.truncated = true
		skip := n - c.max
		if skip < len(prefix) {
			c.buf = append(c.buf, prefix[skip:]...)
			skip = 0
		} else {
			skip -= len(prefix)
		}
		if skip < len(line) {
			c.buf = append(c.buf, line[skip:]...)
		}
		c.buf = append(c.buf, '\n')
		return
	}
	if len(c.buf)+n > 2*c.max {
		// Compact rarely: keep the last max bytes, then keep appending.
		keep := c.buf[len(c.buf)-c.max:]
		c.buf = append(c.buf[:0], keep...)
		c.truncated = true
	}
	c.buf = append(c.buf, prefix...)
	c.buf = append(c.buf, line...)
	c.buf = append(c.buf, '\n')
}

// reset empties the buffer for the next run of a warm instance.
func (c *consoleBuffer) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf, c.truncated = nil, false
}

// String returns the captured tail, starting on a character boundary.
func (c *consoleBuffer) String() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buf
	truncated := c.truncated
	if len(b) > c.max {
		b = b[len(b)-c.max:]
		truncated = true
	}
	if truncated {
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	}
	return string(b), truncated
}

// consoleMethods maps console method names to the prefix of their lines. console.log and
// console.dir lines have none, so plain logging reads as it does in Medplum's log.
var consoleMethods = []struct{ name, prefix string }{
	{"log", ""},
	{"dir", ""},
	{"info", "[info] "},
	{"warn", "[warn] "},
	{"error", "[error] "},
	{"debug", "[debug] "},
	{"trace", "[trace] "},
}

// newConsole builds the console global. Arguments are formatted as Node does, roughly:
// strings raw, printf-style %s %d %i %f %j %o %O %c when the first argument is a string,
// objects as JSON, errors as their stack.
func (x *execution) newConsole() goja.Value {
	rt := x.rt
	console := rt.NewObject()
	for _, m := range consoleMethods {
		prefix, trace := m.prefix, m.name == "trace"
		_ = console.Set(m.name, x.fn(m.name, func(call goja.FunctionCall) goja.Value {
			line := x.formatArgs(call.Arguments)
			if trace {
				line = "Trace: " + line + "\n" + x.stackTrace()
			}
			x.console.write(prefix, line)
			return goja.Undefined()
		}))
	}
	_ = console.Set("assert", x.fn("assert", func(call goja.FunctionCall) goja.Value {
		if call.Argument(0).ToBoolean() {
			return goja.Undefined()
		}
		line := "Assertion failed"
		if len(call.Arguments) > 1 {
			line += ": " + x.formatArgs(call.Arguments[1:])
		}
		x.console.write("[error] ", line)
		return goja.Undefined()
	}))
	return console
}

func (x *execution) stackTrace() string {
	var b bytes.Buffer
	for i, f := range x.rt.CaptureCallStack(20, nil) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("    at ")
		f.Write(&b)
	}
	return b.String()
}

func (x *execution) formatArgs(args []goja.Value) string {
	if len(args) == 0 {
		return ""
	}
	var b strings.Builder
	rest := args
	if goja.IsString(args[0]) && len(args) > 1 && strings.IndexByte(args[0].String(), '%') >= 0 {
		rest = x.printf(&b, args[0].String(), args[1:])
	} else {
		b.WriteString(x.formatValue(args[0], true))
		rest = args[1:]
	}
	for _, a := range rest {
		b.WriteByte(' ')
		b.WriteString(x.formatValue(a, true))
	}
	return b.String()
}

// printf expands Node's format directives in f and returns the arguments it did not use.
func (x *execution) printf(b *strings.Builder, f string, args []goja.Value) []goja.Value {
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '%' || i+1 == len(f) {
			b.WriteByte(c)
			continue
		}
		d := f[i+1]
		if d == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		if !strings.ContainsRune("sdifjoOc", rune(d)) || len(args) == 0 {
			b.WriteByte(c)
			continue
		}
		a := args[0]
		args = args[1:]
		i++
		switch d {
		case 's':
			b.WriteString(x.formatValue(a, true))
		case 'd', 'i':
			n := a.ToFloat()
			if d == 'i' {
				n = math.Trunc(n)
			}
			b.WriteString(x.rt.ToValue(n).String())
		case 'f':
			b.WriteString(x.rt.ToValue(a.ToFloat()).String())
		case 'j', 'o', 'O':
			b.WriteString(x.formatValue(a, false))
		case 'c': // CSS, meaningless here
		}
	}
	return args
}

// formatValue renders one console argument. Strings are raw at the top level (topString) and
// quoted inside %j/%o.
func (x *execution) formatValue(v goja.Value, topString bool) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	}
	obj, isObj := v.(*goja.Object)
	if !isObj {
		if goja.IsString(v) {
			if topString {
				return v.String()
			}
			if q, err := x.stringify(v); err == nil {
				return q
			}
			return v.String()
		}
		if goja.IsBigInt(v) {
			return v.String() + "n"
		}
		if _, ok := v.(*goja.Symbol); ok {
			return "Symbol(" + v.String() + ")"
		}
		return v.String()
	}
	if _, ok := goja.AssertFunction(obj); ok {
		name := obj.Get("name")
		if name == nil || name.String() == "" {
			return "[Function (anonymous)]"
		}
		return "[Function: " + name.String() + "]"
	}
	if s, ok := x.hl7String(obj); ok {
		return s
	}
	if x.isError(obj) {
		if stack := obj.Get("stack"); stack != nil && !goja.IsUndefined(stack) {
			return strings.TrimRight(stack.String(), "\n")
		}
		return safeToString(x.rt, obj)
	}
	if s, err := x.stringify(obj); err == nil {
		return s
	} else if isUncatchable(err) {
		panic(err)
	}
	return safeToString(x.rt, obj)
}

// safeToString is String(v) that never throws (a toString that throws gives "[object]").
func safeToString(rt *goja.Runtime, v goja.Value) string {
	var s string
	if ex := rt.Try(func() { s = v.String() }); ex != nil {
		return "[object]"
	}
	return s
}

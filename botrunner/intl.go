package botrunner

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/dop251/goja"
)

// Intl for the en-US locale only: Intl.DateTimeFormat and Intl.NumberFormat (format,
// formatToParts, resolvedOptions, supportedLocalesOf), and Date's toLocaleString,
// toLocaleDateString and toLocaleTimeString and Number's toLocaleString through them. goja has
// no ICU; the en-US patterns here are ICU's (Node's) for the options they accept, and the tests
// hold Node 22's output for each. Another locale, an option value they do not handle, or a
// combination of date fields whose ICU pattern is not reproduced throws a RangeError naming it
// instead of formatting differently from Node.

type intlState struct {
	obj *goja.Object
}

// intlUnsupported is the RangeError of something this Intl does not do.
func (x *execution) intlUnsupported(what string) *goja.Object {
	return x.newError("RangeError", what+" is not supported in the bot sandbox (its Intl implements en-US only; see docs/bots.md)")
}

var localeTag = regexp.MustCompile(`^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$`)

// intlLocale checks the locales argument and returns the resolved locale: "en-US" or "en".
func (x *execution) intlLocale(v goja.Value) string {
	var tags []string
	switch {
	case v == nil || goja.IsUndefined(v):
		return "en-US"
	case goja.IsString(v):
		tags = []string{v.String()}
	default:
		o, ok := v.(*goja.Object)
		if !ok {
			panic(x.rt.NewTypeError("Incorrect locale information provided"))
		}
		x.rt.ForOf(o, func(e goja.Value) bool {
			if !goja.IsString(e) && !isObject(e) {
				panic(x.rt.NewTypeError("Language ID should be string or object."))
			}
			tags = append(tags, e.String())
			return len(tags) < 100
		})
	}
	if len(tags) == 0 {
		return "en-US"
	}
	for _, t := range tags {
		if !localeTag.MatchString(t) {
			panic(x.newError("RangeError", "Incorrect locale information provided"))
		}
	}
	switch strings.ToLower(tags[0]) {
	case "en-us":
		return "en-US"
	case "en":
		return "en"
	}
	panic(x.intlUnsupported(fmt.Sprintf("The locale '%s'", truncate(tags[0], 40))))
}

// intlOptions is the options argument: undefined or an object.
func (x *execution) intlOptions(v goja.Value) *goja.Object {
	if v == nil || goja.IsUndefined(v) {
		return nil
	}
	if goja.IsNull(v) {
		panic(x.rt.NewTypeError("Cannot convert undefined or null to object"))
	}
	return v.ToObject(x.rt)
}

// optString reads a string option, "" when absent. A value outside allowed is Node's RangeError;
// one in allowed but not in supported (when supported is given) is the sandbox's.
func (x *execution) optString(o *goja.Object, class, name string, allowed, supported []string) string {
	if o == nil {
		return ""
	}
	v := o.Get(name)
	if v == nil || goja.IsUndefined(v) {
		return ""
	}
	s := v.String()
	if allowed != nil && !slices.Contains(allowed, s) {
		panic(x.newError("RangeError", fmt.Sprintf("Value %s out of range for %s options property %s", truncate(s, 40), class, name)))
	}
	if supported != nil && !slices.Contains(supported, s) {
		panic(x.intlUnsupported(fmt.Sprintf("%s option %s: '%s'", class, name, s)))
	}
	return s
}

// optBool reads a boolean option: 0 absent, 1 false, 2 true.
func optBool(o *goja.Object, name string) int {
	if o == nil {
		return 0
	}
	v := o.Get(name)
	if v == nil || goja.IsUndefined(v) {
		return 0
	}
	if v.ToBoolean() {
		return 2
	}
	return 1
}

// optInt reads an integer option in [lo, hi], -1 when absent.
func (x *execution) optInt(o *goja.Object, name string, lo, hi int64) int64 {
	if o == nil {
		return -1
	}
	v := o.Get(name)
	if v == nil || goja.IsUndefined(v) {
		return -1
	}
	f := v.ToFloat()
	if f != f || f < float64(lo) || f > float64(hi) {
		panic(x.newError("RangeError", name+" value is out of range."))
	}
	return int64(f)
}

// rejectOptions throws for options this Intl does not implement, when the bot sets them.
func (x *execution) rejectOptions(o *goja.Object, class string, names ...string) {
	if o == nil {
		return
	}
	for _, n := range names {
		if v := o.Get(n); v != nil && !goja.IsUndefined(v) {
			panic(x.intlUnsupported(fmt.Sprintf("%s option %s", class, n)))
		}
	}
}

func (x *execution) intl() *goja.Object {
	if x.lazy.intl != nil {
		return x.lazy.intl.obj
	}
	rt := x.rt
	o := rt.NewObject()
	supported := x.fn("supportedLocalesOf", func(c goja.FunctionCall) goja.Value {
		var out []any
		if l := c.Argument(0); !goja.IsUndefined(l) {
			func() {
				defer func() {
					if p := recover(); p != nil {
						if e, ok := p.(*goja.Object); ok && e.Get("message") != nil && strings.Contains(e.Get("message").String(), "not supported in the bot sandbox") {
							return
						}
						panic(p)
					}
				}()
				out = append(out, x.intlLocale(l))
			}()
		}
		return rt.NewArray(out...)
	})
	dtf := rt.ToValue(func(c goja.ConstructorCall) *goja.Object {
		return x.newDateTimeFormat(c.Argument(0), c.Argument(1), "any", "date").object(x)
	}).(*goja.Object)
	_ = dtf.Set("supportedLocalesOf", supported)
	nf := rt.ToValue(func(c goja.ConstructorCall) *goja.Object {
		return x.newNumberFormat(c.Argument(0), c.Argument(1)).object(x)
	}).(*goja.Object)
	_ = nf.Set("supportedLocalesOf", supported)
	_ = o.Set("DateTimeFormat", dtf)
	_ = o.Set("NumberFormat", nf)
	_ = o.Set("getCanonicalLocales", x.fn("getCanonicalLocales", func(c goja.FunctionCall) goja.Value {
		if goja.IsUndefined(c.Argument(0)) {
			return rt.NewArray()
		}
		return rt.NewArray(x.intlLocale(c.Argument(0)))
	}))
	_ = o.SetSymbol(goja.SymToStringTag, "Intl")
	x.lazy.intl = &intlState{obj: o}
	return o
}

// installLocaleMethods replaces the toLocale*String methods of Date and Number, which goja
// formats in its own way, with Intl's. The prototypes are not globals that could be built on
// first use, and defining the methods costs a fresh runtime a third more allocations, so they are
// defined only in runtimes of programs that may call them (mayUseLocale).
func (x *execution) installLocaleMethods() {
	rt := x.rt
	dateProto := rt.Get("Date").(*goja.Object).Get("prototype").(*goja.Object)
	for _, m := range []struct{ name, required, defaults string }{
		{"toLocaleString", "any", "all"},
		{"toLocaleDateString", "date", "date"},
		{"toLocaleTimeString", "time", "time"},
	} {
		_ = dateProto.DefineDataProperty(m.name, x.fn(m.name, func(c goja.FunctionCall) goja.Value {
			this, ok := c.This.(*goja.Object)
			if !ok || this.ClassName() != "Date" {
				panic(rt.NewTypeError("this is not a Date object."))
			}
			ms := this.ToNumber().ToFloat()
			if ms != ms {
				return rt.ToValue("Invalid Date")
			}
			f := x.newDateTimeFormat(c.Argument(0), c.Argument(1), m.required, m.defaults)
			return rt.ToValue(joinParts(f.parts(x, ms)))
		}), goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	}
	numProto := rt.Get("Number").(*goja.Object).Get("prototype").(*goja.Object)
	_ = numProto.DefineDataProperty("toLocaleString", x.fn("toLocaleString", func(c goja.FunctionCall) goja.Value {
		var n float64
		switch v := c.This.(type) {
		case *goja.Object:
			if v.ClassName() != "Number" {
				panic(rt.NewTypeError("Number.prototype.toLocaleString requires that 'this' be a Number"))
			}
			n = v.ToNumber().ToFloat()
		default:
			if !goja.IsNumber(v) {
				panic(rt.NewTypeError("Number.prototype.toLocaleString requires that 'this' be a Number"))
			}
			n = v.ToFloat()
		}
		f := x.newNumberFormat(c.Argument(0), c.Argument(1))
		return rt.ToValue(joinParts(f.parts(n)))
	}), goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
}

// intlPart is one element of formatToParts.
type intlPart struct{ typ, value string }

// joinParts is the string format answers. Like V8, it writes ICU's narrow no-break space (before
// AM and PM) as a plain space, which formatToParts keeps.
func joinParts(ps []intlPart) string {
	var b strings.Builder
	for _, p := range ps {
		if p.value == "\u202f" {
			b.WriteByte(' ')
			continue
		}
		b.WriteString(p.value)
	}
	return b.String()
}

func (x *execution) partsArray(ps []intlPart) goja.Value {
	out := make([]any, len(ps))
	for i, p := range ps {
		o := x.rt.NewObject()
		_ = o.Set("type", p.typ)
		_ = o.Set("value", p.value)
		out[i] = o
	}
	return x.rt.NewArray(out...)
}

// mayUseLocale reports whether code may call a toLocale*String method: whether it names one.
// Code can only reach these methods by name (Array's toLocaleString calls its elements', and is
// named too), so only a name built from pieces that do not spell it (or code from outside, such
// as a string given to eval) is missed; such a call gets goja's own formatting.
func mayUseLocale(code string) bool {
	return strings.Contains(code, "toLocale")
}

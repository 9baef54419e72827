package botrunner

import (
	"fmt"
	"reflect"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/unistring"
)

// regexpMatchTimeout bounds one match of a backtracking regular expression.
//
// goja runs a pattern that Go's linear-time regexp package cannot express (backreferences,
// lookaround) with regexp2, a backtracking engine: /^(a+)+\1$/ against 60 a's and a b would run
// for longer than the universe, in a native call that goja's Interrupt cannot stop, so the run
// kept its slot and a CPU forever. regexp2 checks a per-match timeout while it backtracks; goja
// compiles every pattern (literals when the bot's code is compiled, new RegExp at run time) with
// regexp2.DefaultMatchTimeout, which init sets here, in the gateway and in every worker (both run
// this package). The limit is per match, not per run: a run stopped at its deadline while in a
// match gives the CPU back at most this long after it.
//
// goja turns regexp2's timeout error into "no match", which would let a bot go on with a wrong
// answer. guardRegExps therefore wraps the methods that match and throws a RangeError from any
// call whose own matching took regexpSlowCall; since a timed-out match took at least that, such
// a call never answers a plain "no match". The exceptions are a direct call of exec (see
// guardRegExps) and code that reaches regular expressions only by computed names (regexpNames).
const regexpMatchTimeout = 3 * time.Second

// regexpSlowCall is how long a guarded call may spend matching before it throws. It is below
// regexpMatchTimeout because regexp2 reads a clock that a goroutine advances every 100 ms: on a
// loaded machine that goroutine runs late and a match times out early (measured: 1.9 s of a 2 s
// limit with both CPUs busy).
const regexpSlowCall = regexpMatchTimeout * 2 / 3

func init() {
	// regexp2 is used in this program only by goja (go mod why), so the process-wide default is
	// the bots' limit. A pattern compiled before init ran (none is) would keep "no limit".
	regexp2.DefaultMatchTimeout = regexpMatchTimeout
}

// regexpMatchMessage is the RangeError's message.
var regexpMatchMessage = fmt.Sprintf("regular expression took longer than %v to match (catastrophic backtracking?)", regexpSlowCall)

// guardRegExps replaces RegExp.prototype's matching methods with wrappers that throw a RangeError
// when the original's matching took regexpSlowCall or longer: test, and the Symbol methods
// that String.prototype.match, replace, replaceAll, search and split call, and the next method
// of matchAll's iterators. A replacer function's own time does not count against a replace.
//
// RegExp.prototype.exec is left alone: goja watches it, and once it is redefined every regular
// expression in the runtime takes the specification's generic algorithms instead of goja's fast
// paths (splitting 1 MB of text by /\n/ then calls exec at every position and takes seconds). A
// bot that calls exec itself and whose match times out therefore reads null; its run is still
// stopped at its deadline, and when the run's timeout is at most regexpMatchTimeout a match can
// only time out after that deadline, so the null is never seen.
func (x *execution) guardRegExps() {
	rt := x.rt
	ctor, ok := rt.Get("RegExp").(*goja.Object)
	if !ok {
		return
	}
	proto, ok := ctor.Get("prototype").(*goja.Object)
	if !ok {
		return
	}
	orig := proto.Get("test")
	_ = proto.DefineDataProperty("test", x.regexpGuard(orig, -1), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	for _, m := range []struct {
		sym      *goja.Symbol
		replacer int // the argument that may be a function whose time is not the match's, or -1
	}{{goja.SymMatch, -1}, {goja.SymSearch, -1}, {goja.SymSplit, -1}, {goja.SymReplace, 1}} {
		orig := proto.GetSymbol(m.sym)
		_ = proto.DefineDataPropertySymbol(m.sym, x.regexpGuard(orig, m.replacer), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
	// matchAll's iterator matches in its next method; its prototype is reached through one.
	matchAll, ok := goja.AssertFunction(proto.GetSymbol(goja.SymMatchAll))
	if !ok {
		return
	}
	empty, err := rt.New(ctor)
	if err != nil {
		return
	}
	it, err := matchAll(empty, rt.ToValue(""))
	if err != nil {
		return
	}
	if itProto := it.ToObject(rt).Prototype(); itProto != nil {
		orig := itProto.Get("next")
		_ = itProto.DefineDataProperty("next", x.regexpGuard(orig, -1), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
}

// regexpGuard wraps the built-in method orig, keeping its name and length.
func (x *execution) regexpGuard(orig goja.Value, replacer int) goja.Value {
	rt := x.rt
	fn, ok := goja.AssertFunction(orig)
	if !ok {
		return orig
	}
	wrapped := rt.ToValue(func(call goja.FunctionCall) goja.Value {
		args := call.Arguments
		var callbacks time.Duration // spent in the replacer function, not matching
		if replacer >= 0 && replacer < len(args) {
			if cb, ok := goja.AssertFunction(args[replacer]); ok {
				args = append([]goja.Value(nil), args...)
				args[replacer] = rt.ToValue(func(c goja.FunctionCall) goja.Value {
					start := time.Now()
					defer func() { callbacks += time.Since(start) }()
					v, err := cb(c.This, c.Arguments...)
					if err != nil {
						panic(err)
					}
					return v
				})
			}
		}
		start := time.Now()
		v, err := fn(call.This, args...)
		if err != nil {
			panic(err)
		}
		if time.Since(start)-callbacks >= regexpSlowCall {
			panic(x.newError("RangeError", regexpMatchMessage))
		}
		return v
	}).(*goja.Object)
	o := orig.(*goja.Object)
	_ = wrapped.DefineDataProperty("name", o.Get("name"), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = wrapped.DefineDataProperty("length", o.Get("length"), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	return wrapped
}

// regexpNames are the names through which ordinary code reaches a regular expression that no
// literal in it made: the constructor, the String methods that build one from a string, and
// the ways to compile more code. A program with no regular expression literal and none of these
// names (as identifiers, property names or strings) gets no guard: installing it builds goja's
// RegExp prototype, which the runtime otherwise makes only on first use, at some 30 µs a run,
// the cost of a whole trivial run. Code that reaches these only through computed names or
// reflection can still see a timed-out match as "no match": only a bot written to do that, and
// only to itself; the match still stops at regexpMatchTimeout.
var regexpNames = map[unistring.String]bool{
	"RegExp": true, "match": true, "matchAll": true, "search": true, "eval": true, "Function": true,
}

// mayUseRegExps says whether the parsed program can make a regular expression by ordinary means:
// it has a regular expression literal, or names one of regexpNames.
func mayUseRegExps(prg *ast.Program) bool {
	seen := map[uintptr]bool{}
	var walk func(v reflect.Value) bool
	walk = func(v reflect.Value) bool {
		switch v.Kind() {
		case reflect.Interface:
			if v.IsNil() {
				return false
			}
			return walk(v.Elem())
		case reflect.Pointer:
			if v.IsNil() || v.Type().Elem().PkgPath() != astPkg || seen[v.Pointer()] {
				return false
			}
			seen[v.Pointer()] = true
			return walk(v.Elem())
		case reflect.Slice:
			for i := range v.Len() {
				if walk(v.Index(i)) {
					return true
				}
			}
		case reflect.Struct:
			if v.Type().PkgPath() != astPkg {
				return false
			}
			switch n := v.Interface().(type) {
			case ast.RegExpLiteral:
				return true
			case ast.Identifier:
				return regexpNames[n.Name]
			case ast.StringLiteral:
				return regexpNames[n.Value]
			case ast.TemplateElement:
				return regexpNames[n.Parsed]
			}
			for i := range v.NumField() {
				if f := v.Field(i); v.Type().Field(i).IsExported() && walk(f) {
					return true
				}
			}
		}
		return false
	}
	return walk(reflect.ValueOf(prg))
}

var astPkg = reflect.TypeOf(ast.Program{}).PkgPath()

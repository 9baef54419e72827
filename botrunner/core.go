package botrunner

import (
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"sync"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
)

//go:embed core.js
var coreSource string

//go:embed client.js
var clientSource string

// embeddedProgram compiles one of the sandbox's own scripts, once per process.
func embeddedProgram(name, src string) func() *goja.Program {
	return sync.OnceValue(func() *goja.Program {
		ast, err := goja.Parse(name, src, parser.WithDisableSourceMaps)
		if err != nil {
			panic("botrunner: " + name + ": " + err.Error())
		}
		prg, err := goja.CompileAST(ast, true)
		if err != nil {
			panic("botrunner: " + name + ": " + err.Error())
		}
		return prg
	})
}

var (
	coreProgram   = embeddedProgram("@medplum/core", coreSource)
	clientProgram = embeddedProgram("medplum-client", clientSource)
)

// coreModule returns this run's '@medplum/core' exports, evaluating the module on first use.
func (x *execution) coreModule() *goja.Object {
	if x.core == nil {
		native := x.rt.NewObject()
		_ = native.Set("generateId", x.fn("generateId", func(goja.FunctionCall) goja.Value { return x.rt.ToValue(generateID()) }))
		core := x.evalFactory(coreProgram(), native)
		x.defineHL7Exports(core)
		x.core = core
	}
	return x.core
}

// evalFactory runs a script that evaluates to a function and calls it with args. Errors are
// thrown into the caller's JavaScript (or returned by the enclosing Callable or Try).
func (x *execution) evalFactory(prg *goja.Program, args ...goja.Value) *goja.Object {
	fnv, err := x.rt.RunProgram(prg)
	if err != nil {
		panic(err)
	}
	fn, ok := goja.AssertFunction(fnv)
	if !ok {
		panic(x.rt.NewTypeError("sandbox script is not a function"))
	}
	v, err := fn(goja.Undefined(), args...)
	if err != nil {
		panic(err)
	}
	return v.(*goja.Object)
}

// generateID returns a random (version 4) UUID, as Medplum's generateId does.
func generateID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// isError reports whether obj is a JavaScript Error (of any class, subclasses included).
func (x *execution) isError(obj *goja.Object) bool {
	return obj.ClassName() == "Error"
}

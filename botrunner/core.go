package botrunner

import (
	_ "embed"
	"sort"
	"sync"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
	"github.com/google/uuid"
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

// coreExports maps every export of '@medplum/core' to the group of core.js that defines it, or to
// "hl7" for those of package hl7js. TestCoreExportTableMatchesTheGroups keeps it in step.
var coreExports = map[string]string{
	"ContentType": "content", "MedplumClient": "content",

	"OperationOutcomeError": "outcomes", "accepted": "outcomes", "allOk": "outcomes", "assertOk": "outcomes",
	"badRequest": "outcomes", "conflict": "outcomes", "created": "outcomes", "forbidden": "outcomes",
	"getStatus": "outcomes", "gone": "outcomes", "isAccepted": "outcomes", "isGone": "outcomes",
	"isNotFound": "outcomes", "isOk": "outcomes", "isOperationOutcome": "outcomes",
	"normalizeErrorString": "outcomes", "normalizeOperationOutcome": "outcomes", "notFound": "outcomes",
	"notModified": "outcomes", "operationOutcomeIssueToString": "outcomes",
	"operationOutcomeToString": "outcomes", "preconditionFailed": "outcomes", "serverError": "outcomes",
	"tooManyRequests": "outcomes", "unauthorized": "outcomes", "validationError": "outcomes",

	"createReference": "references", "formatCodeableConcept": "references", "formatCoding": "references",
	"formatFamilyName": "references", "formatGivenName": "references", "formatHumanName": "references",
	"getDisplayString": "references", "getReferenceString": "references", "isCodeableConcept": "references",
	"isReference": "references", "isResource": "references", "parseReference": "references",
	"resolveId": "references",

	"deepClone": "resources", "getAllQuestionnaireAnswers": "resources", "getCodeBySystem": "resources",
	"getExtension": "resources", "getExtensionValue": "resources", "getIdentifier": "resources",
	"getQuestionnaireAnswers": "resources", "isEmpty": "resources", "isPopulated": "resources",
	"setCodeBySystem": "resources", "setIdentifier": "resources", "stringify": "resources",

	"calculateAge": "utils", "calculateAgeString": "utils", "capitalize": "utils", "generateId": "utils",
	"isUUID": "utils",

	"Hl7Message": "hl7", "Hl7Segment": "hl7", "Hl7Field": "hl7", "Hl7Context": "hl7",
	"parseHl7DateTime": "hl7", "formatHl7DateTime": "hl7",
}

// coreExportNames is coreExports' keys, sorted: the module's own property order.
var coreExportNames = func() []string {
	names := make([]string, 0, len(coreExports))
	for n := range coreExports {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}()

// coreModule returns this run's '@medplum/core' exports: a dynamic object whose groups are built
// on first read, so a bot that imports createReference pays for the reference helpers only.
func (x *execution) coreModule() *goja.Object {
	if x.core == nil {
		x.coreState = &lazyCore{x: x, groups: map[string]*goja.Object{}, own: map[string]goja.Value{}}
		x.core = x.rt.NewDynamicObject(x.coreState)
	}
	return x.core
}

// lazyCore backs the '@medplum/core' exports object. Bots may assign and delete exports, as they
// could on a CommonJS module's exports; own records those changes.
type lazyCore struct {
	x       *execution
	table   *goja.Object // the group functions core.js evaluates to
	groups  map[string]*goja.Object
	own     map[string]goja.Value // assigned exports; a nil value marks a deleted one
	changed []string              // assigned names that are not in coreExports, in order
}

func (c *lazyCore) group(name string) *goja.Object {
	if g := c.groups[name]; g != nil {
		return g
	}
	x := c.x
	var g *goja.Object
	if name == "hl7" {
		g = x.rt.NewObject()
		x.defineHL7Exports(g)
	} else {
		if c.table == nil {
			native := x.rt.NewObject()
			_ = native.Set("generateId", x.fn("generateId", func(goja.FunctionCall) goja.Value { return x.rt.ToValue(uuid.NewString()) }))
			c.table = x.evalFactory(coreProgram(), native, x.core)
		}
		build, ok := goja.AssertFunction(c.table.Get(name))
		if !ok {
			panic(x.rt.NewTypeError("@medplum/core has no group " + name))
		}
		v, err := build(c.table)
		if err != nil {
			panic(err)
		}
		g = v.(*goja.Object)
	}
	c.groups[name] = g
	return g
}

func (c *lazyCore) Get(key string) goja.Value {
	if v, ok := c.own[key]; ok {
		return v
	}
	if group, ok := coreExports[key]; ok {
		return c.group(group).Get(key)
	}
	return nil
}

func (c *lazyCore) Set(key string, v goja.Value) bool {
	if _, known := coreExports[key]; !known {
		if _, seen := c.own[key]; !seen {
			c.changed = append(c.changed, key)
		}
	}
	c.own[key] = v
	return true
}

func (c *lazyCore) Has(key string) bool {
	if v, ok := c.own[key]; ok {
		return v != nil
	}
	_, ok := coreExports[key]
	return ok
}

func (c *lazyCore) Delete(key string) bool {
	c.own[key] = nil
	return true
}

func (c *lazyCore) Keys() []string {
	keys := make([]string, 0, len(coreExportNames)+len(c.changed))
	for _, names := range [][]string{coreExportNames, c.changed} {
		for _, k := range names {
			if c.Has(k) {
				keys = append(keys, k)
			}
		}
	}
	return keys
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

// isError reports whether obj is a JavaScript Error (of any class, subclasses included).
func (x *execution) isError(obj *goja.Object) bool {
	return obj.ClassName() == "Error"
}

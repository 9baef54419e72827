package botrunner

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
	"github.com/evanw/esbuild/pkg/api"
)

// Program is a bot compiled for the runner.
type Program struct {
	// JS is the compiled CommonJS source, with an inline source map that points back at the
	// original file. Store it (Medplum's Bot.executableCode) and pass it back as Request.Code.
	JS string

	// Warnings are esbuild's warnings, formatted like CompileError ("index.ts:3:14: ...").
	// They do not stop the bot from running.
	Warnings []string

	prg        *goja.Program
	regexpFree bool // prg cannot make regular expressions by ordinary means (mayUseRegExps)
	locale     bool // prg may call a toLocale*String method (mayUseLocale)
}

// CompileError is a bot source that esbuild (or, after it, goja) rejects. Line is 1-based and
// Column 0-based in bytes, as esbuild reports them; both are 0 when the error has no position.
type CompileError struct {
	File    string
	Line    int
	Column  int
	Message string
}

// Error formats the error as "index.ts:3:14: Expected ';' but found 'x'".
func (e *CompileError) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Message
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Message)
}

// supported lists the syntax esbuild must lower because goja cannot parse it. Everything else up
// to ES2022 goja runs natively (TestCompileAcceptsEveryModuleShape runs a sample), so the code
// stays close to what the author wrote. The regexp "d" flag is turned into a RegExp constructor call, so a bot
// using it fails when that line runs instead of failing to load.
var supported = map[string]bool{
	"async-generator":      false,
	"for-await":            false,
	"dynamic-import":       false, // import('x') becomes a require('x') in a promise
	"regexp-match-indices": false,
}

// esbuild's helpers that turn an ES module's namespace object into CommonJS exports, as esbuild
// v0.28 writes them (internal/runtime/runtime.go), and the equivalents the runner uses. Every run
// loads the module afresh, so they run on every run:
//   - __toCommonJS copies every export onto a fresh object as a forwarding getter: a for-of loop,
//     an iterator, a descriptor lookup and a closure per export (about a sixth of a trivial
//     TypeScript bot's run). Marking the namespace object itself gives the same exports — the same
//     names, live getters, __esModule — because nothing else holds the namespace object.
//   - __export defines the namespace's getters with a for-in loop, which also walks
//     Object.prototype, and goja then builds every one of its built-in methods to see that none
//     is enumerable (6% of a bot worker's CPU in fhirgate-bench scenario 3, 98 of a TypeScript
//     echo run's 660 allocations). Object.keys gives the same names: the object it reads is an
//     object literal esbuild writes, and no bot code has run yet.
//   - __copyProps (namespace and default imports, `export * from`) looks up every property's
//     descriptor to copy its enumerability. Every module the sandbox's require gives has only
//     enumerable properties, and the lookup would build each export of '@medplum/core' — loading
//     the bundled package (corepkg.go), tens of milliseconds, for `import * as core` — where the
//     getter it defines reads an export only when the bot does.
//
// If a later esbuild writes a helper differently, its replacement does not happen and only the
// speed is lost (TestCompileDirectExports fails).
var helperRewrites = []struct{ esbuild, direct string }{
	{
		esbuild: "for (var name in all)\n    __defProp(target, name, { get: all[name], enumerable: true });",
		direct:  "for (var names = Object.keys(all), i = 0; i < names.length; i++)\n    __defProp(target, names[i], { get: all[names[i]], enumerable: true });",
	},
	{
		esbuild: `var __toCommonJS = (mod) => __copyProps(__defProp({}, "__esModule", { value: true }), mod);`,
		direct:  `var __toCommonJS = (mod) => __defProp(mod, "__esModule", { value: true });`,
	},
	{
		esbuild: `__defProp(to, key, { get: () => from[key], enumerable: !(desc = __getOwnPropDesc(from, key)) || desc.enumerable });`,
		direct:  `__defProp(to, key, { get: () => from[key], enumerable: true });`,
	},
}

// directExports applies helperRewrites. Each keeps its line count, so the inline source map
// still matches.
func directExports(js string) string {
	for _, r := range helperRewrites {
		js = strings.Replace(js, r.esbuild, r.direct, 1)
	}
	return js
}

// Compile turns TypeScript, ESM or CommonJS source into a CommonJS program for the runner.
// The loader follows the file extension: .ts, .mts and .cts are TypeScript; .js, .mjs and .cjs
// (and a missing filename, Medplum's default "index.js") are JavaScript. Imports of
// '@medplum/core' become require() calls that the sandbox answers; type-only imports vanish.
// A syntax error, a named import '@medplum/core' in the sandbox does not have, or a call of a
// client method the sandbox refuses (medplum.createPdf) is returned as a *CompileError.
func Compile(filename, source string) (*Program, error) {
	if filename == "" {
		filename = "index.js"
	}
	var loader api.Loader
	switch ext := strings.ToLower(path.Ext(filename)); ext {
	case ".ts", ".mts", ".cts":
		loader = api.LoaderTS
	case ".js", ".mjs", ".cjs":
		loader = api.LoaderJS
	default:
		return nil, &CompileError{File: filename, Message: fmt.Sprintf(
			"unsupported file extension %q: use .ts, .mts, .cts, .js, .mjs or .cjs", ext)}
	}
	res := api.Transform(source, api.TransformOptions{
		Loader:         loader,
		Format:         api.FormatCommonJS,
		Platform:       api.PlatformNeutral,
		Target:         api.ES2022,
		Supported:      supported,
		Sourcefile:     filename,
		Sourcemap:      api.SourceMapInline,
		SourcesContent: api.SourcesContentExclude,
		LegalComments:  api.LegalCommentsNone,
		LogLevel:       api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		return nil, compileErrorFrom(filename, res.Errors[0])
	}
	p := &Program{JS: directExports(string(res.Code))}
	if cerr := checkCoreImports(filename, source, p.JS); cerr != nil {
		return nil, cerr
	}
	if cerr := checkRefusedMethods(filename, source, p.JS); cerr != nil {
		return nil, cerr
	}
	for _, w := range res.Warnings {
		p.Warnings = append(p.Warnings, compileErrorFrom(filename, w).Error())
	}
	prg, regexps, err := compileGoja(filename, p.JS)
	if err != nil {
		// esbuild accepted it, so this is syntax esbuild passed through and goja lacks.
		return nil, err
	}
	p.prg, p.regexpFree, p.locale = prg, !regexps, mayUseLocale(p.JS)
	return p, nil
}

func compileErrorFrom(filename string, m api.Message) *CompileError {
	e := &CompileError{File: filename, Message: m.Text}
	if m.Location != nil {
		e.Line, e.Column = m.Location.Line, m.Location.Column
		if m.Location.File != "" {
			e.File = m.Location.File
		}
	}
	return e
}

// Bot code runs inside this function, as Node runs a CommonJS module. The prefix stays on the
// first line so that line numbers (and the inline source map) still match.
const (
	moduleWrapperHead = "(function (exports, require, module, __filename, __dirname) {"
	moduleWrapperTail = "\n})"
)

// compileGoja compiles CommonJS source into a goja program that evaluates to the module function.
// Only inline (data:) source maps are read: goja's default loader would open any path a
// "//# sourceMappingURL=" comment names, including /dev/zero.
// regexps says whether the program may make regular expressions (mayUseRegExps).
func compileGoja(filename, js string) (prg *goja.Program, regexps bool, err error) {
	ast, err := goja.Parse(filename, moduleWrapperHead+js+moduleWrapperTail,
		parser.WithSourceMapLoader(refuseSourceMap))
	if err != nil {
		return nil, false, gojaCompileError(filename, err)
	}
	prg, err = goja.CompileAST(ast, false)
	if err != nil {
		return nil, false, gojaCompileError(filename, err)
	}
	return prg, mayUseRegExps(ast), nil
}

var errExternalSourceMap = errors.New("external source maps are not loaded")

func refuseSourceMap(string) ([]byte, error) { return nil, errExternalSourceMap }

// gojaCompileError reports where goja stopped. Parser positions are in the generated JavaScript
// (the wrapper head shifts line 1); compiler positions go through the inline source map, so they
// already point into the original file.
func gojaCompileError(filename string, err error) *CompileError {
	e := &CompileError{File: filename, Message: err.Error()}
	var list parser.ErrorList
	var one *parser.Error
	var cse *goja.CompilerSyntaxError
	switch {
	case errors.As(err, &list) && len(list) > 0:
		one = list[0]
	case errors.As(err, &one):
	case errors.As(err, &cse) && cse.File != nil:
		pos := cse.File.Position(cse.Offset)
		e.Message, e.Line, e.Column = cse.Message, pos.Line, max(pos.Column-1, 0)
	}
	if one != nil {
		e.Message, e.Line, e.Column = one.Message, one.Position.Line, one.Position.Column-1
		if e.Line == 1 {
			e.Column -= len(moduleWrapperHead)
		}
		e.Column = max(e.Column, 0)
	}
	e.Message = "compiled code does not load in the bot engine: " + e.Message
	return e
}

package botrunner

import (
	"regexp"
	"strings"
)

// esbuild's CommonJS output binds each import of '@medplum/core' to a variable and reads named
// imports as its properties: `var import_core = require("@medplum/core")` then
// `import_core.SNOMED` for `import { SNOMED }`, and `var ns = __toESM(require("@medplum/core"))`
// then `ns.UCUM` for a namespace or default import (which also has `default`).
var (
	coreBinding = regexp.MustCompile(`(?m)^var ([A-Za-z_$][\w$]*) = (__toESM\()?require\("@medplum/core"\)`)
	identRest   = regexp.MustCompile(`^[A-Za-z_$][\w$]*`)
)

// checkCoreImports refuses a bot that imports a name the sandbox's '@medplum/core' does not have
// (coreProvides), as Node refuses a missing named export of an ES module, so a typo or an export
// the sandbox refuses is a 400 at deploy instead of a TypeError in a run. The error points at the
// name's first use in the source.
func checkCoreImports(filename, source, js string) *CompileError {
	for _, m := range coreBinding.FindAllStringSubmatch(js, -1) {
		binding, namespace := m[1], m[2] != ""
		prefix := binding + "."
		for rest := js; ; {
			i := strings.Index(rest, prefix)
			if i < 0 {
				break
			}
			before := byte(' ')
			if i > 0 {
				before = rest[i-1]
			}
			rest = rest[i+len(prefix):]
			if isIdentByte(before) || before == '.' {
				continue // part of another name: my_import_core.x, a.import_core.x
			}
			name := identRest.FindString(rest)
			if name == "" || coreProvides(name) || coreProbes[name] || (namespace && name == "default") {
				continue
			}
			e := &CompileError{File: filename, Message: coreMissing(name)}
			e.Line, e.Column = position(source, name)
			return e
		}
	}
	return nil
}

func isIdentByte(b byte) bool {
	return b == '_' || b == '$' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// position finds the first whole-word occurrence of name in source: 1-based line, 0-based byte
// column, as esbuild reports; 0, 0 when there is none.
func position(source, name string) (line, col int) {
	re := regexp.MustCompile(`(^|[^\w$])` + regexp.QuoteMeta(name) + `($|[^\w$])`)
	loc := re.FindStringSubmatchIndex(source)
	if loc == nil {
		return 0, 0
	}
	start := loc[3] // end of the leading boundary
	line = 1 + strings.Count(source[:start], "\n")
	return line, start - (strings.LastIndex(source[:start], "\n") + 1)
}

// deployRefused are medplum client methods a bot is refused at deploy for using, with the reason:
// calling one could never work, so the author learns it before the bot runs (the call still
// throws the same reason, client.js, for code that reaches it another way).
var deployRefused = map[string]string{
	"createPdf": "medplum.createPdf is not available in the bot sandbox: it renders with Medplum's server (pdfmake and its fonts), which fhirgate does not have",
}

var methodCall = regexp.MustCompile(`\.(createPdf)\s*\(`)

// checkRefusedMethods refuses a bot that calls a method of deployRefused, pointing at the call.
func checkRefusedMethods(filename, source, js string) *CompileError {
	m := methodCall.FindStringSubmatch(js)
	if m == nil {
		return nil
	}
	e := &CompileError{File: filename, Message: deployRefused[m[1]]}
	e.Line, e.Column = position(source, m[1])
	return e
}

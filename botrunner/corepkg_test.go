package botrunner

import (
	"errors"

	"testing"

	"github.com/dop251/goja"
)

func TestCoreReadingAMissingExportThrows(t *testing.T) {
	r := New(Options{})
	res := run(t, r, `export async function handler() {
  const core = require('@medplum/core');
  const out = [typeof core.__esModule, typeof core.then, typeof core.toString, typeof core[Symbol.iterator], 'SNOMEDCT' in core];
  for (const name of ['SNOMEDCT', 'FhircastConnection']) {
    try { core[name]; out.push('read ' + name); } catch (e) { out.push(e instanceof TypeError, e.message); }
  }
  try { const { LOINC, Loinc } = core; out.push(LOINC, Loinc); } catch (e) { out.push(e.message); }
  return out;
}`, jsonEvent(t, `{}`))
	want := `["undefined","undefined","function","undefined",false,` +
		`true,"'@medplum/core' has no export named 'SNOMEDCT'",` +
		`true,"'FhircastConnection' of '@medplum/core' is not available in the bot sandbox: it needs a WebSocket, a network connection of the bot's own",` +
		`"'@medplum/core' has no export named 'Loinc'"]`
	if string(res.Body) != want {
		t.Errorf("got %v %s %s\nwant %s", res.Outcome, res.Body, res.Message, want)
	}
}

func TestCorePackageExportsRunMedplumsCode(t *testing.T) {
	r := New(Options{})
	res := run(t, r, `import { evalFhirPath, deepEquals, formatAddress, parseSearchRequest, SNOMED } from '@medplum/core';
export async function handler(medplum: unknown, event: any) {
  const p = event.input;
  return [
    evalFhirPath("Patient.name.where(use = 'official').given.first()", p),
    evalFhirPath("Patient.birthDate < @2000-01-01", p),
    deepEquals({ a: [1, 2] }, { a: [1, 2] }),
    formatAddress(p.address[0]),
    [parseSearchRequest('Patient?gender=female&_count=5').filters[0].code, parseSearchRequest('Patient?_count=5').count],
    SNOMED,
  ];
}`, jsonEvent(t, `{"resourceType":"Patient","gender":"female","birthDate":"1990-02-03",
  "name":[{"use":"nickname","given":["Bee"]},{"use":"official","given":["Beatrice","Ann"],"family":"Smith"}],
  "address":[{"line":["1 Main St"],"city":"Springfield","state":"IL","postalCode":"62701"}]}`))
	want := `[["Beatrice"],[true],true,"1 Main St, Springfield, IL, 62701",["gender",5],"http://snomed.info/sct"]`
	if string(res.Body) != want {
		t.Errorf("got %v %s %s\nwant %s", res.Outcome, res.Body, res.Message, want)
	}
}

// The package is loaded only for exports core.js does not write.
func TestCorePackageLoadsOnlyWhenNeeded(t *testing.T) {
	x := &execution{rt: goja.New()}
	core := x.coreModule()
	for _, name := range []string{"SNOMED", "LOINC", "createReference", "isNotFound", "OperationOutcomeError", "Hl7Message"} {
		if goja.IsUndefined(core.Get(name)) {
			t.Errorf("%s is undefined", name)
		}
	}
	if x.coreState.real != nil {
		t.Fatal("reading core.js's exports loaded the package")
	}
	if _, ok := goja.AssertFunction(core.Get("evalFhirPath")); !ok || x.coreState.real == nil {
		t.Fatal("evalFhirPath did not come from the package")
	}
}

func TestCompileRefusesMissingCoreImports(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"import { LOINC, SNOMEDCT } from '@medplum/core';\nexport const handler = () => [LOINC, SNOMEDCT];",
			"index.ts:1:16: '@medplum/core' has no export named 'SNOMEDCT'"},
		{"import * as core from '@medplum/core';\n\nexport const handler = () => core.Ucum;",
			"index.ts:3:34: '@medplum/core' has no export named 'Ucum'"},
		{"export async function handler(medplum: any) {\n  return medplum.createPdf({ docDefinition: {} });\n}",
			"index.ts:2:17: medplum.createPdf is not available in the bot sandbox: it renders with Medplum's server (pdfmake and its fonts), which fhirgate does not have"},
		{"import { type BotEvent, FhircastConnection } from '@medplum/core';\nexport const handler = (m: unknown, e: BotEvent) => new FhircastConnection();",
			"index.ts:1:24: 'FhircastConnection' of '@medplum/core' is not available in the bot sandbox: it needs a WebSocket, a network connection of the bot's own"},
	} {
		_, err := Compile("index.ts", tc.src)
		var cerr *CompileError
		if !errors.As(err, &cerr) || err.Error() != tc.want {
			t.Errorf("Compile(%q) = %v, want %s", tc.src, err, tc.want)
		}
	}
	for _, src := range []string{
		"import { LOINC, evalFhirPath, type BotEvent } from '@medplum/core';\nexport const handler = (m: unknown, e: BotEvent) => evalFhirPath(LOINC, {});",
		"import core from '@medplum/core';\nexport const handler = () => core.default;",
		"import * as core from '@medplum/core';\nexport const handler = () => [core.default, core.UCUM];",
		"const core = require('@medplum/core');\nexports.handler = () => core.SNOMEDCT;", // a run-time TypeError
	} {
		if _, err := Compile("index.ts", src); err != nil {
			t.Errorf("Compile(%q): %v", src, err)
		}
	}
}

// A thrown outcome with only diagnostics reads as Medplum's normalizeErrorString gives it.
func TestCoreOutcomeStrings(t *testing.T) {
	r := New(Options{})
	res := run(t, r, `import { OperationOutcomeError, normalizeErrorString, operationOutcomeToString, badRequest } from '@medplum/core';
export async function handler() {
  const e = new OperationOutcomeError({resourceType: 'OperationOutcome', issue: [{severity: 'error', code: 'required', diagnostics: 'Missing required parameter(s): member-name'}]}, {cause: 'c'});
  return [e.message, e.cause, e.name, normalizeErrorString(e), operationOutcomeToString(badRequest('Bad', 'Patient.name')),
    operationOutcomeToString({resourceType: 'OperationOutcome', issue: [{severity: 'error', code: 'x'}]})];
}`, jsonEvent(t, `{}`))
	want := `["Missing required parameter(s): member-name","c","OperationOutcomeError","Missing required parameter(s): member-name","Bad (Patient.name)","Unknown error"]`
	if string(res.Body) != want {
		t.Errorf("got %v %s %s\nwant %s", res.Outcome, res.Body, res.Message, want)
	}
}

// BenchmarkCorePackage is a run whose bot reads a package export (evalFhirPath), against one that
// reads only core.js's (SNOMED): under awslambda the package loads once per warm instance, under
// vmcontext on every run.
func BenchmarkCorePackage(b *testing.B) {
	ev := Event{ContentType: MediaFHIR, Input: mustInput(b, MediaFHIR, `{"resourceType":"Patient","id":"1","name":[{"given":["A"],"family":"B"}]}`)}
	b.Run("Constants", func(b *testing.B) {
		benchRun(b, "index.ts", `import { SNOMED, LOINC } from '@medplum/core';
export async function handler(medplum: unknown, event: any) { return [SNOMED, LOINC, event.input.id] }`, ev, nil)
	})
	b.Run("FHIRPath", func(b *testing.B) {
		benchRun(b, "index.ts", `import { evalFhirPath } from '@medplum/core';
export async function handler(medplum: unknown, event: any) { return evalFhirPath('Patient.name.given', event.input) }`, ev, nil)
	})
}

// A bot worker loads the package as the gateway's process does.
func TestCorePackageInAWorker(t *testing.T) {
	p := mustCompile(t, "index.ts", `import { evalFhirPath, SNOMED } from '@medplum/core';
export async function handler(medplum: unknown, event: any) { return [evalFhirPath('Patient.name.given', event.input), SNOMED] }`)
	for _, runtime := range []string{RuntimeAWSLambda, RuntimeVMContext} {
		res, err := newTestPool(t, PoolOptions{}).Run(ctxT(t), Request{CacheKey: "core", Code: p.JS, Runtime: runtime,
			Event: jsonEvent(t, `{"resourceType":"Patient","name":[{"given":["Ann"]}]}`)})
		if err != nil || res.Outcome != OutcomeSuccess || string(res.Body) != `[["Ann"],"http://snomed.info/sct"]` {
			t.Errorf("%s: %v %+v", runtime, err, res)
		}
	}
}

// Namespace and default imports read an export only when the bot does: one of core.js's does
// not load the package (see helperRewrites).
func TestCoreNamespaceImportIsLazy(t *testing.T) {
	r := New(Options{})
	for _, src := range []string{
		"import * as core from '@medplum/core';\nexport async function handler() { return [core.SNOMED, Object.keys(core).includes('evalFhirPath')] }",
		"import core from '@medplum/core';\nexport async function handler() { return [core.SNOMED, Object.keys(core).includes('evalFhirPath')] }",
	} {
		before := corePkgLoads.Load()
		res := run(t, r, src, jsonEvent(t, `{}`))
		if string(res.Body) != `["http://snomed.info/sct",true]` {
			t.Errorf("%s: %v %s %s", src, res.Outcome, res.Body, res.Message)
		}
		if n := corePkgLoads.Load() - before; n != 0 {
			t.Errorf("%s: the package was loaded %d times", src, n)
		}
	}
}

// An OperationOutcomeError the package throws is one of the module's OperationOutcomeError, as in
// Medplum, where the package is one.
func TestCorePackageErrorsAreOperationOutcomeErrors(t *testing.T) {
	res := run(t, New(Options{}), `import { OperationOutcomeError, validateResource, normalizeOperationOutcome } from '@medplum/core';
class Mine extends OperationOutcomeError {}
export async function handler() {
  try {
    validateResource({ resourceType: 'Patient', foo: 1 } as any);
    return 'no error';
  } catch (e: any) {
    return [e instanceof OperationOutcomeError, e instanceof Mine, new Mine({ resourceType: 'OperationOutcome', issue: [] }) instanceof Mine,
      new OperationOutcomeError({ resourceType: 'OperationOutcome', issue: [] }) instanceof Mine, normalizeOperationOutcome(e).issue[0].code, ({}) instanceof OperationOutcomeError];
  }
}`, jsonEvent(t, `{}`))
	if string(res.Body) != `[true,false,true,false,"structure",false]` {
		t.Errorf("got %v %s %s", res.Outcome, res.Body, res.Message)
	}
}

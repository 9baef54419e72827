package botrunner

import (
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// TestMedplumCoreHelpers evaluates each expression in a bot that imported everything from
// '@medplum/core' as `core`, and compares JSON.stringify of the result.
func TestMedplumCoreHelpers(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want string
	}{
		{"ContentType", `[core.ContentType.JSON, core.ContentType.FHIR_JSON, core.ContentType.TEXT, core.ContentType.HL7_V2, core.ContentType.FORM_URL_ENCODED, core.ContentType.JAVASCRIPT, core.ContentType.HTML, core.ContentType.PNG, core.ContentType.OCTET_STREAM]`,
			`["application/json","application/fhir+json","text/plain","x-application/hl7-v2+er7","application/x-www-form-urlencoded","text/javascript","text/html","image/png","application/octet-stream"]`},
		{"global ContentType", `ContentType.JSON_PATCH`, `"application/json-patch+json"`},
		{"createReference patient", `core.createReference({ resourceType: 'Patient', id: '1', name: [{ prefix: ['Dr.'], given: ['Ann', 'B'], family: 'Lee', suffix: ['Jr'] }] })`,
			`{"reference":"Patient/1","display":"Dr. Ann B Lee Jr"}`},
		{"createReference without a display", `core.createReference({ resourceType: 'Observation', id: 'o' })`, `{"reference":"Observation/o"}`},
		{"createReference organization", `core.createReference({ resourceType: 'Organization', id: 'x', name: 'Acme' })`, `{"reference":"Organization/x","display":"Acme"}`},
		{"createReference device", `core.createReference({ resourceType: 'Device', id: 'd', deviceName: [{ name: 'Pump' }] })`, `{"reference":"Device/d","display":"Pump"}`},
		{"createReference code", `core.createReference({ resourceType: 'Observation', id: 'o', code: { coding: [{ code: 'x', display: 'Heart rate' }] } })`,
			`{"reference":"Observation/o","display":"Heart rate"}`},
		{"createReference name text only", `core.createReference({ resourceType: 'Patient', id: '2', name: [{ text: 'Zed' }] })`, `{"reference":"Patient/2","display":"Zed"}`},
		{"getReferenceString", `[core.getReferenceString({ resourceType: 'Patient', id: '1' }), core.getReferenceString({ reference: 'Group/g' })]`, `["Patient/1","Group/g"]`},
		{"resolveId", `[core.resolveId({ reference: 'Patient/123' }), core.resolveId({ resourceType: 'Patient', id: 'r' }), core.resolveId(undefined)]`, `["123","r",null]`},
		{"parseReference", `core.parseReference({ reference: 'Patient/9' })`, `["Patient","9"]`},
		{"parseReference bad", `(() => { try { core.parseReference({ reference: 'nope' }) } catch (e: any) { return [e.message, e.outcome.issue[0].code] } })()`, `["Unable to parse reference string.","structure"]`},
		{"normalizeErrorString", `[core.normalizeErrorString(new Error('e')), core.normalizeErrorString('s'), core.normalizeErrorString(core.notFound), core.normalizeErrorString({ code: 'C' }), core.normalizeErrorString({ x: 1 }), core.normalizeErrorString(null)]`,
			`["e","s","Not found","C","{\"x\":1}","Unknown error"]`},
		{"OperationOutcomeError", `(() => { const e = new core.OperationOutcomeError(core.badRequest('bad', 'expr')); return [e instanceof Error, e.message, e.outcome.issue[0].expression] })()`,
			`[true,"bad (expr)",["expr"]]`},
		{"outcomes", `[core.allOk.id, core.allOk.issue[0].code, core.notFound.issue[0].details.text, core.badRequest('x').issue[0].code, core.unauthorized.id, core.forbidden.id, core.gone.id, core.tooManyRequests.issue[0].code, core.created.id]`,
			`["ok","informational","Not found","invalid","unauthorized","forbidden","gone","throttled","created"]`},
		{"getStatus", `[core.allOk, core.created, core.accepted('u'), core.notModified, core.unauthorized, core.forbidden, core.notFound, core.conflict('c'), core.gone, core.preconditionFailed, core.tooManyRequests, core.badRequest('b'), core.serverError(new Error('x'))].map(core.getStatus)`,
			`[200,201,202,304,401,403,404,409,410,412,429,400,500]`},
		{"isOk", `[core.isOk(core.allOk), core.isOk(core.created), core.isOk(core.notFound), core.isNotFound(core.notFound), core.isGone(core.gone)]`, `[true,true,false,true,true]`},
		{"operationOutcomeToString", `core.operationOutcomeToString({ resourceType: 'OperationOutcome', issue: [{ details: { text: 'a' }, diagnostics: 'd', expression: ['x', 'y'] }, {}] })`, `"a (d) (x, y); Unknown error"`},
		{"normalizeOperationOutcome", `[core.normalizeOperationOutcome(new core.OperationOutcomeError(core.notFound)).id, core.normalizeOperationOutcome(new Error('m')).issue[0].details.text]`, `["not-found","m"]`},
		{"formatHumanName", `[core.formatHumanName({ prefix: ['Ms'], given: ['A'], family: 'B', use: 'official' }, { use: true }), core.formatHumanName({ given: ['A'], family: 'B', suffix: ['III'] }, { suffix: false })]`,
			`["Ms A B [official]","A B"]`},
		{"formatCodeableConcept", `[core.formatCodeableConcept({ text: 't' }), core.formatCodeableConcept({ coding: [{ display: 'd' }, { code: 'c' }] }), core.formatCodeableConcept(undefined)]`, `["t","d, c",""]`},
		{"getCodeBySystem", `core.getCodeBySystem({ coding: [{ system: 'a', code: '1' }, { system: 'b', code: '2' }] }, 'b')`, `"2"`},
		{"identifiers", `(() => { const p: any = { resourceType: 'Patient' }; core.setIdentifier(p, 's', 'v1'); core.setIdentifier(p, 's', 'v2'); return [core.getIdentifier(p, 's'), p.identifier.length] })()`, `["v2",1]`},
		{"extensions", `core.getExtensionValue({ extension: [{ url: 'a', extension: [{ url: 'b', valueString: 'deep' }] }] }, 'a', 'b')`, `"deep"`},
		{"getQuestionnaireAnswers", `core.getQuestionnaireAnswers({ resourceType: 'QuestionnaireResponse', item: [{ linkId: 'q1', answer: [{ valueString: 'x' }] }, { linkId: 'g', item: [{ linkId: 'q2', answer: [{ valueInteger: 3 }] }] }] })`,
			`{"q1":{"valueString":"x"},"q2":{"valueInteger":3}}`},
		{"getAllQuestionnaireAnswers", `core.getAllQuestionnaireAnswers({ item: [{ linkId: 'q', answer: [{ valueString: 'a' }, { valueString: 'b' }] }] })`, `{"q":[{"valueString":"a"},{"valueString":"b"}]}`},
		{"stringify drops empties", `core.stringify({ a: '', b: {}, c: [], d: [''], e: 0, f: 'x' })`, `"{\"e\":0,\"f\":\"x\"}"`}, // as Medplum's: an array of empties goes too
		{"isUUID and generateId", `[core.isUUID(core.generateId()), core.isUUID('nope'), core.generateId() !== core.generateId()]`, `[true,false,true]`},
		{"deepClone", `(() => { const a = { x: [1] }; const b = core.deepClone(a); b.x.push(2); return a })()`, `{"x":[1]}`},
		{"calculateAgeString", `[core.calculateAgeString('2000-06-15', '2024-06-14'), core.calculateAgeString('2024-01-01', '2024-03-05'), core.calculateAgeString('2024-03-01', '2024-03-05')]`, `["023Y","002M","004D"]`},
		{"MedplumClient cannot be built", `(() => { try { new core.MedplumClient() } catch (e: any) { return e.message } })()`, `"MedplumClient cannot be constructed inside a bot: use the handler's medplum argument"`},
		{"same module each require", `require('@medplum/core') === require('@medplum/core')`, `true`},
	}
	r := New(Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := `import * as core from '@medplum/core';
export async function handler(): Promise<any> { return JSON.stringify(` + tc.expr + `) }`
			res := run(t, r, src, jsonEvent(t, `{}`))
			if res.Outcome != OutcomeSuccess {
				t.Fatalf("%v: %s", res.Outcome, res.Message)
			}
			if got := string(res.Body); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestWebGlobals(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want string // a regular expression for JSON.stringify of the value
	}{
		{"URL", `(() => { const u = new URL('https://user@fhir.example.com:8443/R4/Patient?name=a%20b#x'); return [u.hostname, u.port, u.pathname, u.searchParams.get('name'), u.hash] })()`,
			`\["fhir\.example\.com","8443","/R4/Patient","a b","#x"\]`},
		{"relative URL", `[new URL('../Observation?x=1', 'https://h/R4/Patient/1').href, new URL('/abs', 'https://h/R4/').href, new URL('https://o/x', 'https://h/').href]`,
			`\["https://h/R4/Observation\?x=1","https://h/abs","https://o/x"\]`},
		{"URL instances", `(() => { const u = new URL('https://h/p'); return [u instanceof URL, u.toString(), JSON.stringify({ u }), URL.name] })()`,
			`\[true,"https://h/p","\{\\"u\\":\\"https://h/p\\"\}","URL"\]`},
		{"bad base", `(() => { try { new URL('x', 'not absolute'); return 'made' } catch (e: any) { return e.message } })()`, `"Invalid base URL: not absolute"`},
		{"invalid URL", `(() => { try { new URL('nope'); return 'parsed' } catch (e: any) { return e.name } })()`, `"TypeError"`},
		{"URLSearchParams", `(() => { const p = new URLSearchParams('a=1&b=2&a=3'); p.append('c', 'x y'); return [p.getAll('a'), p.toString()] })()`,
			`\[\["1","3"\],"a=1&b=2&a=3&c=x\+y"\]`},
		{"TextEncoder", `Array.from(new TextEncoder().encode('aé€😀'))`, `\[97,195,169,226,130,172,240,159,152,128\]`},
		{"TextEncoder encodeInto", `(() => { const b = new Uint8Array(4); const r = new TextEncoder().encodeInto('aé€', b); return [r.read, r.written, Array.from(b)] })()`,
			`\[2,3,\[97,195,169,0\]\]`},
		{"TextDecoder", `new TextDecoder().decode(new Uint8Array([0xEF, 0xBB, 0xBF, 104, 195, 169]))`, `"hé"`},
		{"TextDecoder view", `new TextDecoder('utf8').decode(new Uint8Array([1, 104, 105, 2]).subarray(1, 3))`, `"hi"`},
		{"TextDecoder ArrayBuffer", `new TextDecoder().decode(new Uint8Array([111, 107]).buffer)`, `"ok"`},
		{"TextDecoder replacement", `new TextDecoder().decode(new Uint8Array([104, 0xFF]))`, `"h\x{FFFD}"`},
		{"TextDecoder fatal", `(() => { try { new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array([0xFF])); return 'decoded' } catch (e: any) { return e.name } })()`, `"TypeError"`},
		{"TextDecoder ignoreBOM", `new TextDecoder('utf-8', { ignoreBOM: true }).decode(new Uint8Array([0xEF, 0xBB, 0xBF])).length`, `1`},
		{"TextDecoder latin1", `(() => { try { new TextDecoder('latin1'); return 'made' } catch (e: any) { return e.name } })()`, `"RangeError"`},
		{"TextDecoder properties", `[new TextDecoder().encoding, new TextDecoder().fatal, new TextEncoder().encoding]`, `\["utf-8",false,"utf-8"\]`},
		{"globals can be replaced", `(() => { (globalThis as any).URL = 1; return (globalThis as any).URL })()`, `1`},
	}
	r := New(Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, r, `export async function handler(): Promise<any> { return JSON.stringify(`+tc.expr+`) }`, jsonEvent(t, `{}`))
			if res.Outcome != OutcomeSuccess {
				t.Fatalf("%v: %s", res.Outcome, res.Message)
			}
			if !regexp.MustCompile(`^` + tc.want + `$`).Match(res.Body) {
				t.Errorf("got %s, want /%s/", res.Body, tc.want)
			}
		})
	}
}

func TestCoreExportTableMatchesTheGroups(t *testing.T) {
	x := &execution{rt: goja.New()}
	core := x.coreModule()
	groups := map[string][]string{}
	for name, g := range coreExports {
		groups[g] = append(groups[g], name)
	}
	for g := range groups {
		obj := x.coreState.group(g)
		got := obj.Keys()
		sort.Strings(got)
		want := groups[g]
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("group %s exports %v, table says %v", g, got, want)
		}
	}
	if keys := core.Keys(); len(keys) != len(coreExportNames) {
		t.Errorf("module has %d keys, want %d", len(keys), len(coreExportNames))
	}
	// Every name core.js writes is one the package has (a typo would be an export Medplum lacks).
	for name := range coreExports {
		if !corePkgNames[name] {
			t.Errorf("core.js exports %s, which @medplum/core %s does not", name, corePkgVersion)
		}
	}
}

func TestCoreExportsCanBeChanged(t *testing.T) {
	r := New(Options{})
	res := run(t, r, `export async function handler() {
  const core = require('@medplum/core');
  core.extra = 1;
  core.createReference = () => 'patched';
  delete core.allOk;
  return [core.extra, core.createReference(), 'allOk' in core, Object.keys(core).includes('extra'), Object.keys(core).includes('allOk'), typeof core.badRequest];
}`, jsonEvent(t, `{}`))
	if string(res.Body) != `[1,"patched",false,true,false,"function"]` {
		t.Errorf("got %v %s %s", res.Outcome, res.Body, res.Message)
	}
}

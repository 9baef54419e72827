package botrunner

import (
	"encoding/json"
	"strings"
	"testing"
)

// coreCases are calls of the exports core.js writes itself, with inputs as bots pass them;
// TestCoreNativeExportsBehaveAsMedplums compares their results with the pinned package's.
var coreCases = []string{
	`core.getReferenceString({resourceType: 'Patient', id: '1'})`,
	`core.getReferenceString({reference: 'Patient/2'})`,
	`core.createReference({resourceType: 'Patient', id: '1', name: [{given: ['Ann', 'B'], family: 'Lee', prefix: ['Dr']}]})`,
	`core.createReference({resourceType: 'Observation', id: '1', code: {text: 'BMI'}})`,
	`core.createReference({resourceType: 'Organization', id: 'o', name: 'Acme'})`,
	`core.createReference({resourceType: 'Device', id: 'd', deviceName: [{name: 'Pump'}]})`,
	`core.createReference({resourceType: 'Practitioner', id: 'p'})`,
	`core.getDisplayString({resourceType: 'Patient', id: '1', name: [{text: 'Just Text'}]})`,
	`core.getDisplayString({resourceType: 'MedicationRequest', id: 'm', medicationCodeableConcept: {coding: [{display: 'Aspirin'}]}})`,
	`core.getDisplayString({resourceType: 'Observation', id: 'o', code: {coding: [{system: 'x', code: '123'}]}})`,
	`core.formatHumanName({prefix: ['Dr'], given: ['Ann', 'B'], family: 'Lee', suffix: ['Jr'], use: 'official'})`,
	`core.formatHumanName({prefix: ['Dr'], given: ['Ann'], family: 'Lee', suffix: ['Jr'], use: 'official'}, {all: true})`,
	`core.formatHumanName({prefix: ['Dr'], given: ['Ann'], family: 'Lee'}, {prefix: false})`,
	`core.formatHumanName({text: 'Only text'})`,
	`core.formatGivenName({given: ['Ann', 'B'], family: 'Lee'})`,
	`core.formatFamilyName({given: ['Ann'], family: 'Lee'})`,
	`core.formatCodeableConcept({coding: [{display: 'A'}, {code: 'b'}]})`,
	`core.formatCodeableConcept({text: 'T', coding: [{display: 'A'}]})`,
	`core.formatCoding({system: 's', code: 'c'})`,
	`core.formatCoding({system: 's', code: 'c', display: 'D'})`,
	`core.resolveId({reference: 'Patient/9'})`,
	`core.resolveId({resourceType: 'Patient', id: '8'})`,
	`core.parseReference({reference: 'Patient/7'})`,
	`core.isReference({reference: 'Patient/1'})`,
	`core.isResource({resourceType: 'Patient'})`,
	`core.isCodeableConcept({text: 'x'})`,
	`core.getCodeBySystem({coding: [{system: 'a', code: '1'}, {system: 'b', code: '2'}]}, 'b')`,
	`(() => { const c = {coding: [{system: 'a', code: '1'}]}; core.setCodeBySystem(c, 'a', '3'); core.setCodeBySystem(c, 'b', '4'); return c })()`,
	`core.getIdentifier({identifier: [{system: 'mrn', value: '42'}]}, 'mrn')`,
	`(() => { const r = {resourceType: 'Patient'}; core.setIdentifier(r, 'mrn', '1'); core.setIdentifier(r, 'mrn', '2'); return r })()`,
	`core.getExtensionValue({extension: [{url: 'a', extension: [{url: 'b', valueString: 'deep'}]}]}, 'a', 'b')`,
	`core.getExtension({extension: [{url: 'a', valueInteger: 1}]}, 'a')`,
	`core.getQuestionnaireAnswers({resourceType: 'QuestionnaireResponse', item: [{linkId: 'q1', answer: [{valueString: 'x'}, {valueString: 'y'}]}, {linkId: 'g', item: [{linkId: 'q2', answer: [{valueBoolean: true}]}]}]})`,
	`core.getAllQuestionnaireAnswers({resourceType: 'QuestionnaireResponse', item: [{linkId: 'q1', answer: [{valueString: 'x'}, {valueString: 'y'}]}, {linkId: 'g', item: [{linkId: 'q1', answer: [{valueInteger: 3}]}]}]})`,
	`[core.isEmpty(''), core.isEmpty([]), core.isEmpty({}), core.isEmpty(0), core.isEmpty(null), core.isEmpty('a'), core.isEmpty([1])]`,
	`[core.isPopulated(''), core.isPopulated([]), core.isPopulated({a: 1}), core.isPopulated(0), core.isPopulated('a')]`,
	`core.stringify({a: '', b: {}, c: [], d: [1, '', {}], e: {f: ''}, g: 0, h: false, i: null})`,
	`core.stringify({a: 1, b: [2]}, true)`,
	`core.deepClone({a: [1, {b: 2}]})`,
	`core.calculateAge('2000-02-29', '2024-02-28')`,
	`core.calculateAge('2020-01-15', '2020-03-14')`,
	`[core.calculateAgeString('1990-06-01', '2024-05-31'), core.calculateAgeString('2023-01-01', '2024-02-15'), core.calculateAgeString('2024-01-01', '2024-01-20')]`,
	`[core.capitalize('hello'), core.capitalize('')]`,
	`[core.isUUID('8d3c6a8e-2f3b-4a55-9a3e-1b2c3d4e5f60'), core.isUUID('nope')]`,
	`[core.allOk, core.created, core.notModified, core.notFound, core.unauthorized, core.forbidden, core.gone, core.preconditionFailed, core.multipleMatches, core.tooManyRequests, core.unsupportedMediaType, core.unauthorizedTokenExpired, core.unauthorizedTokenAudience]`,
	`[core.badRequest('b'), core.badRequest('b', 'Patient.x'), core.conflict('c'), core.conflict('c', 'code'), core.validationError('v'), core.accepted('loc'), core.businessRule('k', 'm'), core.contentTooLarge('big'), core.serverTimeout(), core.serverTimeout('slow'), core.serverError(new Error('z'))]`,
	`[core.allOk, core.created, core.notModified, core.accepted('x'), core.notFound, core.gone, core.conflict('x'), core.unauthorized, core.badRequest('x'), core.serverError(new Error('e'))].map((o) => [core.getStatus(o), core.isOk(o), core.isNotFound(o), core.isGone(o), core.isAccepted(o), core.isConflict(o), core.isCreated(o), core.isUnauthenticated(o)])`,
	`[core.isOperationOutcome(core.allOk), core.isOperationOutcome({resourceType: 'Patient'})]`,
	`[core.normalizeErrorString(undefined), core.normalizeErrorString('s'), core.normalizeErrorString(new Error('e')), core.normalizeErrorString(core.notFound), core.normalizeErrorString({code: 'C'}), core.normalizeErrorString({x: 1}), core.normalizeErrorString(new core.OperationOutcomeError(core.badRequest('bad', 'expr')))]`,
	`[core.normalizeOperationOutcome(new core.OperationOutcomeError(core.gone)), core.normalizeOperationOutcome(core.notFound), core.normalizeOperationOutcome(new Error('plain')), core.normalizeOperationOutcome('str')]`,
	`core.operationOutcomeToString({resourceType: 'OperationOutcome', issue: [{details: {text: 'a'}, diagnostics: 'd', expression: ['x', 'y']}, {diagnostics: 'only'}, {}]})`,
	`core.operationOutcomeIssueToString({details: {text: 't'}, expression: ['e']})`,
	`(() => { const e = new core.OperationOutcomeError(core.notFound, {cause: 'why'}); return [e.message, e.name, e.outcome.id, e.cause, e instanceof Error] })()`,
	`(() => { try { core.assertOk(core.notFound, {}) } catch (e) { return e.message } })()`,
	`(() => { try { core.parseReference({}) } catch (e) { return [e.message, e.outcome] } })()`,
	`(() => { try { core.parseReference({reference: 'Patient'}) } catch (e) { return [e.message, e.outcome] } })()`,
	`core.ContentType`,
	`core.createReference({resourceType: 'DocumentReference', id: 'd', description: 'Scan'})`,
	`core.createReference({resourceType: 'DocumentReference', id: 'd', type: {text: 'Note'}})`,
	`core.createReference({resourceType: 'Appointment', id: 'a', serviceType: [{coding: [{code: 'x', display: 'Consult'}]}]})`,
	`core.createReference({resourceType: 'MedicationStatement', id: 'm', medicationCodeableConcept: {text: 'Ibuprofen'}})`,
	`core.createReference({resourceType: 'Condition', id: 'c', code: {text: 'Only text'}})`,
	`core.createReference({resourceType: 'Patient', id: 'p', name: [{given: ['']}]})`,
	`core.createReference({resourceType: 'DetectedIssue', id: 'x', reference: 'elsewhere'})`,
	`core.createReference({resourceType: 'Patient'})`,
	`core.getReferenceString({})`,
	`[core.formatCoding({code: 'c', display: 'D'}, true), core.formatCoding(undefined), core.formatFamilyName({}), core.formatGivenName({})]`,
}

// TestCoreNativeExportsBehaveAsMedplums runs coreCases under Node with the pinned @medplum/core
// and in the sandbox, and compares the JSON of each result.
func TestCoreNativeExportsBehaveAsMedplums(t *testing.T) {
	list := "[\n" + strings.Join(coreCases, ",\n") + "\n]"
	nodeOut := nodeCore(t, "process.stdout.write(JSON.stringify("+list+"))")
	res := run(t, New(Options{}), "const core = require('@medplum/core');\nexport async function handler() { return JSON.stringify("+list+") }", jsonEvent(t, `{}`))
	if res.Outcome != OutcomeSuccess {
		t.Fatalf("%v: %s", res.Outcome, res.Message)
	}
	var want, got []json.RawMessage
	if err := json.Unmarshal(nodeOut, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(res.Body, &got); err != nil {
		t.Fatal(err)
	}
	for i := range coreCases {
		if string(got[i]) != string(want[i]) {
			t.Errorf("%s\n sandbox: %s\n medplum: %s", coreCases[i], got[i], want[i])
		}
	}
}

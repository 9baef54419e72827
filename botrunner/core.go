package botrunner

import (
	_ "embed"
	"sort"
	"strings"
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

// coreExports maps every export of '@medplum/core' that fhirgate writes itself to the group of
// core.js that defines it, or to "hl7" for those of package hl7js. They are the exports bots use
// most, cheap to build; the package's other exports come from the bundled package (corepkg.go).
// TestCoreExportTableMatchesTheGroups keeps it in step.
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
	"businessRule": "outcomes", "contentTooLarge": "outcomes", "isConflict": "outcomes", "isCreated": "outcomes",
	"isUnauthenticated": "outcomes", "multipleMatches": "outcomes", "serverTimeout": "outcomes",
	"unauthorizedTokenAudience": "outcomes", "unauthorizedTokenExpired": "outcomes",
	"unsupportedMediaType": "outcomes",

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

// coreConstants are the string and number constants of the "constants" group of core.js.
var coreConstants = strings.Fields(
	"ALL_SERVICE_TYPES_CODE CPT DEFAULT_ACCEPT DEFAULT_MAX_SEARCH_COUNT DEFAULT_SEARCH_COUNT " +
		"HL7_V2_0203 HTTP_HL7_ORG HTTP_TERMINOLOGY_HL7_ORG ICD10 " +
		"INVALID_MEDICATION_CART_CONTENTS_RESPONSE INVALID_MEDICATION_CART_RESPONSE " +
		"INVALID_MEDICATION_CHECKOUT_RESPONSE INVALID_MEDICATION_ORDER_RESPONSE " +
		"INVALID_MEDICATION_ORDER_SET_RESPONSE INVALID_MEDICATION_SEARCH_RESPONSE LOINC " +
		"MEDICATION_REQUEST_STATUS_REASON_RESPONSE_NOT_RECEIVED " +
		"MEDICATION_REQUEST_STATUS_REASON_SYSTEM MEDPLUM_CLI_CLIENT_ID MEDPLUM_RELEASES_URL " +
		"MEDPLUM_VERSION NDC OccurrenceChangedExtensionURI PARTICIPATION_TYPE_SYSTEM " +
		"PATIENT_PREFERRED_PHARMACY_URL PHARMACY_PREFERENCE_TYPE_SYSTEM PHARMACY_TYPE_PREFERRED " +
		"PHARMACY_TYPE_PRIMARY PRIMARY_PERFORMER_CODE RATE_LIMIT_RESET_EXTENSION_URL " +
		"REQUIRES_DIAGNOSIS_CODE REQUIRES_MEDICAL_NECESSITY_CODE REQUIRES_PROCEDURE_CODE RXNORM " +
		"RecurrenceIdExtensionURI RecurrenceTemplateExtensionURI " +
		"RecurringAppointmentSeriesIdentifierSystem SCHEDULING_ELIGIBILITY_SYSTEM " +
		"SCHEDULING_SERVICE_TYPE_SYSTEM SNOMED SchedulingBookedByOperationURI SchedulingColorURI " +
		"SchedulingEncounterCodingURI SchedulingExternalUrlURI SchedulingMedicalNecessityURI " +
		"SchedulingParametersURI SchedulingPlanDefinitionURI SchedulingScheduleColorURI " +
		"SchedulingSiteURI SchedulingSlotCapacityURI SchedulingUnvalidatedBookingURI " +
		"ServiceTypeReferenceURI TimezoneExtensionURI UCUM",
)

func init() {
	for _, name := range coreConstants {
		coreExports[name] = "constants"
	}
}

// coreExportNames is every name the module provides (coreProvides), sorted: the module's own
// property order.
var coreExportNames = func() []string {
	names := make([]string, 0, len(corePkgNames)+len(coreExports))
	for n := range coreExports {
		names = append(names, n)
	}
	for n := range corePkgNames {
		if _, dup := coreExports[n]; !dup && coreProvides(n) {
			names = append(names, n)
		}
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
	real    *goja.Object // the bundled package's exports (corepkg.go), loaded on first use
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

// Get reads an export: core.js's, else the package's. Any other name throws a TypeError naming
// it, so a bot never computes with an undefined code system or function. The exceptions are the
// names that code probes for on any object and must read as absent: __esModule (CommonJS
// interop), then (is it a promise?), toJSON and Object.prototype's own (they are answered by the
// prototype). Symbols never reach Get.
func (c *lazyCore) Get(key string) goja.Value {
	if v, ok := c.own[key]; ok {
		return v
	}
	if group, ok := coreExports[key]; ok {
		return c.group(group).Get(key)
	}
	if coreProvides(key) {
		return c.pkg().Get(key)
	}
	if coreProbes[key] {
		return nil
	}
	panic(c.x.rt.NewTypeError(coreMissing(key)))
}

// coreProbes are the names reading the module gives undefined (or Object.prototype's member) for.
var coreProbes = map[string]bool{
	"__esModule": true, "then": true, "toJSON": true,
	"constructor": true, "hasOwnProperty": true, "isPrototypeOf": true, "propertyIsEnumerable": true,
	"toLocaleString": true, "toString": true, "valueOf": true, "__proto__": true,
	"__defineGetter__": true, "__defineSetter__": true, "__lookupGetter__": true, "__lookupSetter__": true,
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
	return coreProvides(key)
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

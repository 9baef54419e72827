package authz

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// newRequest builds a Request from a URL relative to the FHIR base.
func newRequest(t testing.TB, method, rel, body string) *Request {
	t.Helper()
	u, err := url.Parse(rel)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for s := range strings.SplitSeq(u.EscapedPath(), "/") {
		if s == "" {
			continue
		}
		d, err := url.PathUnescape(s)
		if err != nil {
			t.Fatal(err)
		}
		segs = append(segs, d)
	}
	r := &Request{Method: method, Segments: segs, Query: u.Query(), Header: http.Header{}}
	if body != "" {
		r.Body = []byte(body)
	}
	return r
}

const (
	obsPat1   = `{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p1"}}`
	obsPat2   = `{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p2"}}`
	obsNoSubj = `{"resourceType":"Observation","status":"final","code":{"text":"x"}}`
	obsMixed  = `{"resourceType":"Observation","subject":{"reference":"Patient/p1"},"performer":[{"reference":"Patient/p2"}]}`
	pat1      = `{"resourceType":"Patient","id":"p1"}`
)

func batch(entries ...string) string {
	return `{"resourceType":"Bundle","type":"batch","entry":[` + strings.Join(entries, ",") + `]}`
}

func entry(method, u, resource string) string {
	e := `{"request":{"method":"` + method + `","url":"` + u + `"}`
	if resource != "" {
		e += `,"resource":` + resource
	}
	return e + "}"
}

type decideCase struct {
	name    string
	scope   string
	patient string
	method  string
	url     string
	body    string
	header  map[string]string
	allow   bool
	// response and stored, checked when allow: whether the answer must be
	// checked, and which stored resources.
	response bool
	stored   string
}

// decideCases is the table of (scope set, request) -> decision.
var decideCases = []decideCase{
	// Full access: no resource scope at all.
	{name: "no scope is full: read", scope: "", method: "GET", url: "Patient/1", allow: true},
	{name: "openid offline is full: create", scope: "openid offline", method: "POST", url: "Observation", body: obsNoSubj, allow: true},
	{name: "full: delete", scope: "openid", method: "DELETE", url: "Patient/1", allow: true},
	{name: "full: unknown operation still refused", scope: "openid", method: "POST", url: "Patient/1/$frobnicate", allow: false},
	{name: "full: system history", scope: "", method: "GET", url: "_history", allow: true},
	{name: "bad token scope denies", scope: "user/Patient.xyz", method: "GET", url: "Patient/1", allow: false},

	// Capabilities.
	{name: "metadata with narrow scope", scope: "user/Observation.r", method: "GET", url: "metadata", allow: true},
	{name: "metadata with openid-only fhirUser", scope: "openid fhirUser user/Patient.r", method: "GET", url: "metadata", allow: true},
	{name: "metadata POST refused", scope: "user/*.cruds", method: "POST", url: "metadata", allow: false},
	{name: "OPTIONS passes", scope: "user/Observation.r", method: "OPTIONS", url: "Patient", allow: true},

	// Read / vread / history.
	{name: "read with r", scope: "user/Patient.r", method: "GET", url: "Patient/1", allow: true},
	{name: "HEAD read with r", scope: "user/Patient.r", method: "HEAD", url: "Patient/1", allow: true},
	{name: "read without r", scope: "user/Patient.s", method: "GET", url: "Patient/1", allow: false},
	{name: "read other type", scope: "user/Patient.rs", method: "GET", url: "Observation/1", allow: false},
	{name: "read wildcard", scope: "user/*.r", method: "GET", url: "Observation/1", allow: true},
	{name: "read v1 read", scope: "user/Observation.read", method: "GET", url: "Observation/1", allow: true},
	{name: "read v1 write only", scope: "user/Observation.write", method: "GET", url: "Observation/1", allow: false},
	{name: "read v1 star", scope: "user/Observation.*", method: "GET", url: "Observation/1", allow: true},
	{name: "read system scope", scope: "system/Observation.r", method: "GET", url: "Observation/1", allow: true},
	{name: "vread with r", scope: "user/Observation.r", method: "GET", url: "Observation/1/_history/2", allow: true},
	{name: "vread without r", scope: "user/Observation.s", method: "GET", url: "Observation/1/_history/2", allow: false},
	{name: "instance history", scope: "user/Observation.r", method: "GET", url: "Observation/1/_history", allow: true},
	{name: "type history", scope: "user/Observation.r", method: "GET", url: "Observation/_history", allow: true},
	{name: "type history other type", scope: "user/Observation.r", method: "GET", url: "Patient/_history", allow: false},
	{name: "system history needs *", scope: "user/Observation.r", method: "GET", url: "_history", allow: false},
	{name: "system history with *", scope: "user/*.r", method: "GET", url: "_history", allow: true},
	{name: "unknown lower-case type", scope: "user/*.cruds", method: "GET", url: "patient/1", allow: false},

	// Search.
	{name: "search with s", scope: "user/Observation.s", method: "GET", url: "Observation?code=1234", allow: true},
	{name: "search without s", scope: "user/Observation.r", method: "GET", url: "Observation?code=1234", allow: false},
	{name: "search v1 read", scope: "patient/Observation.read user/Observation.read", method: "GET", url: "Observation", allow: true},
	{name: "POST _search with s", scope: "user/Observation.s", method: "POST", url: "Observation/_search", body: "code=1234", allow: true},
	{name: "POST _search include in body", scope: "user/Observation.s", method: "POST", url: "Observation/_search", body: "_include=Observation:patient", allow: false},
	{name: "POST _search include in body allowed", scope: "user/Observation.s user/Patient.s", method: "POST", url: "Observation/_search", body: "_include=Observation:patient", allow: true},
	{name: "GET _search refused", scope: "user/Observation.s", method: "GET", url: "Observation/_search", allow: false},
	{name: "system search needs *", scope: "user/Observation.s", method: "GET", url: "?code=1", allow: false},
	{name: "system search with *", scope: "user/*.s", method: "GET", url: "?code=1", allow: true},
	{name: "system search _type allowed", scope: "user/Observation.s user/Condition.s", method: "GET", url: "?_type=Observation,Condition", allow: true},
	{name: "system search _type one missing", scope: "user/Observation.s", method: "GET", url: "?_type=Observation,Condition", allow: false},
	{name: "system POST _search _type", scope: "user/Observation.s", method: "POST", url: "_search", body: "_type=Observation", allow: true},
	{name: "compartment search user", scope: "user/Observation.s", method: "GET", url: "Patient/1/Observation", allow: true},
	{name: "compartment search wrong type", scope: "user/Observation.s", method: "GET", url: "Patient/1/Condition", allow: false},
	{name: "_filter needs *", scope: "user/Observation.s", method: "GET", url: "Observation?_filter=code eq 1", allow: false},
	{name: "_filter with *", scope: "user/*.s", method: "GET", url: "Observation?_filter=code eq 1", allow: true},
	{name: "_query needs *", scope: "user/Observation.s", method: "GET", url: "Observation?_query=x", allow: false},
	{name: "_getpages needs *", scope: "user/Observation.s", method: "GET", url: "?_getpages=abc", allow: false},
	{name: "_getpages with *", scope: "user/*.rs", method: "GET", url: "?_getpages=abc", allow: true},

	// Includes and revincludes.
	{name: "include explicit target allowed", scope: "user/Observation.s user/Patient.s", method: "GET", url: "Observation?_include=Observation:subject:Patient", allow: true},
	{name: "include explicit target missing", scope: "user/Observation.s", method: "GET", url: "Observation?_include=Observation:subject:Patient", allow: false},
	{name: "include target needs s not r", scope: "user/Observation.s user/Patient.r", method: "GET", url: "Observation?_include=Observation:patient", allow: false},
	{name: "include by table all targets", scope: "user/MedicationRequest.s user/Medication.s", method: "GET", url: "MedicationRequest?_include=MedicationRequest:medication", allow: true},
	{name: "include subject needs all targets", scope: "user/Observation.s user/Patient.s", method: "GET", url: "Observation?_include=Observation:subject", allow: false},
	{name: "include subject with *", scope: "user/Observation.s user/*.s", method: "GET", url: "Observation?_include=Observation:subject", allow: true},
	{name: "include unknown param needs *", scope: "user/Observation.s user/Patient.s", method: "GET", url: "Observation?_include=Observation:foo", allow: false},
	{name: "include star needs *", scope: "user/Observation.s user/Patient.s", method: "GET", url: "Observation?_include=*", allow: false},
	{name: "two includes allowed", scope: "user/MedicationRequest.s user/Medication.s user/Encounter.s", method: "GET", url: "MedicationRequest?_include=MedicationRequest:medication&_include=MedicationRequest:encounter", allow: true},
	{name: "two includes one missing", scope: "user/MedicationRequest.s user/Medication.s", method: "GET", url: "MedicationRequest?_include=MedicationRequest:medication&_include=MedicationRequest:encounter", allow: false},
	{name: "include iterate", scope: "user/MedicationRequest.s user/Medication.s user/Encounter.s", method: "GET", url: "MedicationRequest?_include:iterate=Encounter:encounter", allow: true},
	{name: "include iterate missing", scope: "user/MedicationRequest.s user/Medication.s", method: "GET", url: "MedicationRequest?_include:iterate=Encounter:encounter", allow: false},
	{name: "include bad modifier", scope: "user/*.s", method: "GET", url: "Observation?_include:foo=Observation:patient", allow: false},
	{name: "revinclude source type", scope: "user/Patient.s user/Provenance.s", method: "GET", url: "Patient?_revinclude=Provenance:target", allow: true},
	{name: "revinclude source missing", scope: "user/Patient.s", method: "GET", url: "Patient?_revinclude=Provenance:target", allow: false},
	{name: "revinclude iterate", scope: "user/Patient.s user/Observation.s", method: "GET", url: "Patient?_revinclude:iterate=Observation:subject", allow: true},

	// _has and chains.
	{name: "_has allowed", scope: "user/Patient.s user/Observation.s", method: "GET", url: "Patient?_has:Observation:patient:code=1234", allow: true},
	{name: "_has missing", scope: "user/Patient.s", method: "GET", url: "Patient?_has:Observation:patient:code=1234", allow: false},
	{name: "_has nested", scope: "user/Patient.s user/Observation.s", method: "GET", url: "Patient?_has:Observation:patient:_has:AuditEvent:entity:agent=x", allow: false},
	{name: "_has nested allowed", scope: "user/Patient.s user/Observation.s user/AuditEvent.s", method: "GET", url: "Patient?_has:Observation:patient:_has:AuditEvent:entity:agent=x", allow: true},
	{name: "_has malformed", scope: "user/*.s", method: "GET", url: "Patient?_has:Observation=1", allow: false},
	{name: "chain explicit", scope: "user/Observation.s user/Patient.s", method: "GET", url: "Observation?subject:Patient.name=peter", allow: true},
	{name: "chain explicit missing", scope: "user/Observation.s", method: "GET", url: "Observation?subject:Patient.name=peter", allow: false},
	{name: "chain by table", scope: "user/Observation.s user/Patient.s", method: "GET", url: "Observation?patient.name=peter", allow: true},
	{name: "chain two hops", scope: "user/Observation.s user/Patient.s", method: "GET", url: "Observation?patient.organization.name=acme", allow: false},
	{name: "chain two hops allowed", scope: "user/Observation.s user/Patient.s user/Organization.s", method: "GET", url: "Observation?patient.organization.name=acme", allow: true},
	{name: "chain unknown param needs *", scope: "user/Observation.s user/Patient.s", method: "GET", url: "Observation?focus.name=x", allow: false},

	// Granular scopes.
	{name: "granular search constrained", scope: "user/Observation.rs?category=laboratory", method: "GET", url: "Observation?category=laboratory", allow: true},
	{name: "granular search unconstrained", scope: "user/Observation.rs?category=laboratory", method: "GET", url: "Observation", allow: false},
	{name: "granular search other value", scope: "user/Observation.rs?category=laboratory", method: "GET", url: "Observation?category=vital-signs", allow: false},
	{name: "granular search list widens", scope: "user/Observation.rs?category=laboratory", method: "GET", url: "Observation?category=laboratory,vital-signs", allow: false},
	{name: "granular search ANDed stays narrow", scope: "user/Observation.rs?category=laboratory", method: "GET", url: "Observation?category=laboratory&category=vital-signs", allow: true},
	{name: "granular read refused", scope: "user/Observation.rs?category=laboratory", method: "GET", url: "Observation/1", allow: false},
	{name: "granular two params both", scope: "user/Observation.s?category=laboratory&status=final", method: "GET", url: "Observation?status=final&category=laboratory", allow: true},
	{name: "granular two params one", scope: "user/Observation.s?category=laboratory&status=final", method: "GET", url: "Observation?category=laboratory", allow: false},
	{name: "granular system|code value", scope: "user/Observation.s?category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory", method: "GET", url: "Observation?category=http://terminology.hl7.org/CodeSystem/observation-category%7Claboratory", allow: true},
	{name: "granular plus plain read", scope: "user/Observation.s?category=laboratory user/Observation.r", method: "GET", url: "Observation/1", allow: true},
	{name: "granular not for includes", scope: "user/Observation.s user/Patient.s?gender=female", method: "GET", url: "Observation?_include=Observation:patient", allow: false},
	{name: "granular POST _search", scope: "user/Observation.s?category=laboratory", method: "POST", url: "Observation/_search", body: "category=laboratory", allow: true},
	{name: "granular write refused", scope: "user/Observation.c?category=laboratory", method: "POST", url: "Observation", body: obsNoSubj, allow: false},

	// Create, update, patch, delete.
	{name: "create with c", scope: "user/Observation.c", method: "POST", url: "Observation", body: obsNoSubj, allow: true},
	{name: "create with rs", scope: "user/Observation.rs", method: "POST", url: "Observation", body: obsNoSubj, allow: false},
	{name: "create v1 write", scope: "user/Observation.write", method: "POST", url: "Observation", allow: true},
	{name: "conditional create needs s", scope: "user/Observation.c", method: "POST", url: "Observation", header: map[string]string{"If-None-Exist": "identifier=x"}, allow: false},
	{name: "conditional create with cs", scope: "user/Observation.cs", method: "POST", url: "Observation", header: map[string]string{"If-None-Exist": "identifier=x"}, allow: true},
	{name: "update with u", scope: "user/Observation.u", method: "PUT", url: "Observation/1", body: obsNoSubj, allow: true},
	{name: "update with c", scope: "user/Observation.c", method: "PUT", url: "Observation/1", allow: false},
	{name: "conditional update needs us", scope: "user/Observation.u", method: "PUT", url: "Observation?identifier=x", allow: false},
	{name: "conditional update with us", scope: "user/Observation.us", method: "PUT", url: "Observation?identifier=x", allow: true},
	{name: "patch with u", scope: "user/Observation.u", method: "PATCH", url: "Observation/1", allow: true},
	{name: "patch without u", scope: "user/Observation.crds", method: "PATCH", url: "Observation/1", allow: false},
	{name: "delete with d", scope: "user/Observation.d", method: "DELETE", url: "Observation/1", allow: true},
	{name: "delete without d", scope: "user/Observation.cru", method: "DELETE", url: "Observation/1", allow: false},
	{name: "conditional delete needs ds", scope: "user/Observation.d", method: "DELETE", url: "Observation?identifier=x", allow: false},
	{name: "delete wildcard", scope: "user/*.d", method: "DELETE", url: "Observation/1", allow: true},
	{name: "TRACE refused", scope: "user/*.cruds", method: "TRACE", url: "Observation/1", allow: false},

	// Operations.
	{name: "execute needs r on Bot", scope: "user/Bot.r", method: "POST", url: "Bot/b1/$execute", allow: true},
	{name: "execute type level", scope: "user/Bot.r", method: "POST", url: "Bot/$execute?identifier=x", allow: true},
	{name: "execute with extra path", scope: "user/Bot.r", method: "POST", url: "Bot/b1/$execute/extra", allow: true},
	{name: "execute without r on Bot", scope: "user/Bot.s user/Patient.r", method: "POST", url: "Bot/b1/$execute", allow: false},
	{name: "execute on other type", scope: "user/*.r", method: "POST", url: "Patient/1/$execute", allow: false},
	{name: "deploy needs u on Bot", scope: "user/Bot.r", method: "POST", url: "Bot/b1/$deploy", allow: false},
	{name: "deploy with u", scope: "user/Bot.ru", method: "POST", url: "Bot/b1/$deploy", allow: true},
	{name: "bot read", scope: "user/Bot.r", method: "GET", url: "Bot/b1", allow: true},
	{name: "bot create needs c", scope: "user/Bot.rs", method: "POST", url: "Bot", allow: false},
	{name: "bot search", scope: "user/Bot.s", method: "GET", url: "Bot?name=x", allow: true},
	{name: "job status needs r on Bot", scope: "user/Observation.r", method: "GET", url: "job/j1/status", allow: false},
	{name: "job status with Bot.r", scope: "user/Bot.r", method: "GET", url: "job/j1/status", allow: true},
	{name: "everything needs rs on *", scope: "user/Patient.rs", method: "GET", url: "Patient/1/$everything", allow: false},
	{name: "everything with *", scope: "user/*.rs", method: "GET", url: "Patient/1/$everything", allow: true},
	{name: "lastn is a search", scope: "user/Observation.s", method: "GET", url: "Observation/$lastn?code=1", allow: true},
	{name: "expand on ValueSet", scope: "user/ValueSet.r", method: "GET", url: "ValueSet/$expand?url=x", allow: true},
	{name: "expand on other type", scope: "user/*.r", method: "GET", url: "Patient/$expand", allow: false},
	{name: "validate-code", scope: "user/CodeSystem.r", method: "GET", url: "CodeSystem/$validate-code", allow: true},
	{name: "unknown operation", scope: "user/*.cruds", method: "POST", url: "Patient/$frob", allow: false},
	{name: "unknown system operation", scope: "user/*.cruds", method: "POST", url: "$purge", allow: false},
	{name: "configured operation", scope: "user/Patient.s", method: "POST", url: "Patient/$match", allow: true},
	{name: "configured operation missing perm", scope: "user/Patient.r", method: "POST", url: "Patient/$match", allow: false},
	{name: "configured system operation needs *", scope: "user/Patient.r", method: "GET", url: "$export", allow: false},
	{name: "configured system operation", scope: "system/*.r", method: "GET", url: "$export", allow: true},

	// Batch and transaction.
	{name: "batch all allowed", scope: "user/Patient.r user/Observation.c", method: "POST", url: "", body: batch(entry("GET", "Patient/1", ""), entry("POST", "Observation", obsNoSubj)), allow: true},
	{name: "batch one entry denied", scope: "user/Patient.r", method: "POST", url: "", body: batch(entry("GET", "Patient/1", ""), entry("POST", "Observation", obsNoSubj)), allow: false},
	{name: "batch search entry include", scope: "user/Observation.s", method: "POST", url: "", body: batch(entry("GET", "Observation?_include=Observation:patient", "")), allow: false},
	{name: "batch delete entry", scope: "user/Observation.d", method: "POST", url: "", body: batch(entry("DELETE", "Observation/1", "")), allow: true},
	{name: "transaction absolute url under base", scope: "user/Patient.r", method: "POST", url: "", body: strings.Replace(batch(entry("GET", "http://x/fhir/R4/Patient/1", "")), `"batch"`, `"transaction"`, 1), allow: true},
	{name: "batch absolute url outside base", scope: "user/*.cruds", method: "POST", url: "", body: batch(entry("GET", "http://x/admin/Patient/1", "")), allow: false},
	{name: "batch nested batch refused", scope: "user/*.cruds", method: "POST", url: "", body: batch(entry("POST", "", batch())), allow: false},
	{name: "batch entry dot segment", scope: "user/*.cruds", method: "POST", url: "", body: batch(entry("GET", "Patient/../Observation/1", "")), allow: false},
	{name: "batch entry unknown op", scope: "user/*.cruds", method: "POST", url: "", body: batch(entry("POST", "Patient/$frob", "")), allow: false},
	{name: "batch entry conditional create", scope: "user/Observation.c", method: "POST", url: "", body: `{"resourceType":"Bundle","type":"batch","entry":[{"resource":` + obsNoSubj + `,"request":{"method":"POST","url":"Observation","ifNoneExist":"identifier=x"}}]}`, allow: false},
	{name: "POST base not a bundle", scope: "user/*.cruds", method: "POST", url: "", body: pat1, allow: false},
	{name: "POST base collection bundle", scope: "user/*.cruds", method: "POST", url: "", body: `{"resourceType":"Bundle","type":"collection"}`, allow: false},
	{name: "batch entry without request", scope: "user/*.cruds", method: "POST", url: "", body: `{"resourceType":"Bundle","type":"batch","entry":[{"resource":{}}]}`, allow: false},

	// Patient context.
	{name: "patient reads own Patient", scope: "patient/Patient.r", patient: "p1", method: "GET", url: "Patient/p1", allow: true},
	{name: "patient reads other Patient", scope: "patient/Patient.r", patient: "p1", method: "GET", url: "Patient/p2", allow: false},
	{name: "patient scope without context", scope: "patient/Patient.r", method: "GET", url: "Patient/p1", allow: false},
	{name: "patient reads Observation: response check", scope: "patient/Observation.rs", patient: "p1", method: "GET", url: "Observation/o1", allow: true, response: true},
	{name: "patient search confined by patient", scope: "patient/Observation.rs", patient: "p1", method: "GET", url: "Observation?patient=p1", allow: true, response: true},
	{name: "patient search confined by subject ref", scope: "patient/Observation.rs", patient: "p1", method: "GET", url: "Observation?subject=Patient/p1&code=1", allow: true, response: true},
	{name: "patient search confined by subject:Patient", scope: "patient/Observation.rs", patient: "p1", method: "GET", url: "Observation?subject:Patient=p1", allow: true, response: true},
	{name: "patient search unconfined refused", scope: "patient/Observation.rs", patient: "p1", method: "GET", url: "Observation?code=1", allow: false},
	{name: "patient search other patient refused", scope: "patient/Observation.rs", patient: "p1", method: "GET", url: "Observation?patient=p2", allow: false},
	{name: "patient search list refused", scope: "patient/Observation.rs", patient: "p1", method: "GET", url: "Observation?patient=p1,p2", allow: false},
	{name: "patient search Patient by _id", scope: "patient/Patient.rs", patient: "p1", method: "GET", url: "Patient?_id=p1", allow: true, response: true},
	{name: "patient search Patient unconfined", scope: "patient/Patient.rs", patient: "p1", method: "GET", url: "Patient?name=x", allow: false},
	{name: "patient compartment search own", scope: "patient/Observation.s", patient: "p1", method: "GET", url: "Patient/p1/Observation", allow: true, response: true},
	{name: "patient compartment search other", scope: "patient/Observation.s", patient: "p1", method: "GET", url: "Patient/p2/Observation", allow: false},
	{name: "patient include checked in answer", scope: "patient/Observation.s patient/Practitioner.s", patient: "p1", method: "GET", url: "Observation?patient=p1&_include=Observation:performer:Practitioner", allow: true, response: true},
	{name: "patient outside type read", scope: "patient/Practitioner.r", patient: "p1", method: "GET", url: "Practitioner/d1", allow: true},
	{name: "patient outside type write refused", scope: "patient/Practitioner.cu", patient: "p1", method: "PUT", url: "Practitioner/d1", body: `{"resourceType":"Practitioner","id":"d1"}`, allow: false},
	{name: "patient Binary refused", scope: "patient/*.rs", patient: "p1", method: "GET", url: "Binary/b1", allow: false},
	{name: "patient Task refused", scope: "patient/*.rs", patient: "p1", method: "GET", url: "Task?patient=p1", allow: false},
	{name: "patient custom type refused", scope: "patient/*.rs", patient: "p1", method: "GET", url: "Widget/w1", allow: false},
	{name: "user custom type allowed", scope: "user/*.rs", method: "GET", url: "Widget/w1", allow: true},
	{name: "patient unchecked compartment type", scope: "patient/*.rs", patient: "p1", method: "GET", url: "AuditEvent?patient=p1", allow: false},
	{name: "patient creates own Observation", scope: "patient/Observation.c", patient: "p1", method: "POST", url: "Observation", body: obsPat1, allow: true},
	{name: "patient creates other's Observation", scope: "patient/Observation.c", patient: "p1", method: "POST", url: "Observation", body: obsPat2, allow: false},
	{name: "patient creates unattached Observation", scope: "patient/Observation.c", patient: "p1", method: "POST", url: "Observation", body: obsNoSubj, allow: false},
	{name: "patient creates mixed Observation", scope: "patient/Observation.c", patient: "p1", method: "POST", url: "Observation", body: obsMixed, allow: false},
	{name: "patient create without body", scope: "patient/Observation.c", patient: "p1", method: "POST", url: "Observation", allow: false},
	{name: "patient updates own Observation: stored check", scope: "patient/Observation.u", patient: "p1", method: "PUT", url: "Observation/o1", body: obsPat1, allow: true, stored: "Observation/o1"},
	{name: "patient updates to other patient", scope: "patient/Observation.u", patient: "p1", method: "PUT", url: "Observation/o1", body: obsPat2, allow: false},
	{name: "patient conditional update refused", scope: "patient/Observation.us", patient: "p1", method: "PUT", url: "Observation?patient=p1", body: obsPat1, allow: false},
	{name: "patient deletes: stored check", scope: "patient/Observation.d", patient: "p1", method: "DELETE", url: "Observation/o1", allow: true, stored: "Observation/o1"},
	{name: "patient json patch away from subject", scope: "patient/Observation.u", patient: "p1", method: "PATCH", url: "Observation/o1", body: `[{"op":"replace","path":"/status","value":"final"}]`, allow: true, stored: "Observation/o1"},
	{name: "patient json patch of subject", scope: "patient/Observation.u", patient: "p1", method: "PATCH", url: "Observation/o1", body: `[{"op":"replace","path":"/subject","value":{"reference":"Patient/p2"}}]`, allow: false},
	{name: "patient fhirpath patch refused", scope: "patient/Observation.u", patient: "p1", method: "PATCH", url: "Observation/o1", body: `{"resourceType":"Parameters"}`, allow: false},
	{name: "patient updates own Patient", scope: "patient/Patient.u", patient: "p1", method: "PUT", url: "Patient/p1", body: pat1, allow: true},
	{name: "patient updates other Patient", scope: "patient/Patient.u", patient: "p1", method: "PUT", url: "Patient/p2", body: `{"resourceType":"Patient","id":"p2"}`, allow: false},
	{name: "patient deletes own Patient refused", scope: "patient/Patient.d", patient: "p1", method: "DELETE", url: "Patient/p1", allow: false},
	{name: "patient type history refused", scope: "patient/Observation.r", patient: "p1", method: "GET", url: "Observation/_history", allow: false},
	{name: "patient everything own", scope: "patient/*.rs", patient: "p1", method: "GET", url: "Patient/p1/$everything", allow: true, response: true},
	{name: "patient everything other", scope: "patient/*.rs", patient: "p1", method: "GET", url: "Patient/p2/$everything", allow: false},
	{name: "patient system search refused", scope: "patient/*.rs", patient: "p1", method: "GET", url: "?_type=Observation", allow: false},
	{name: "patient paging link checked", scope: "patient/*.rs", patient: "p1", method: "GET", url: "?_getpages=abc", allow: true, response: true},
	{name: "patient _has criterion", scope: "patient/Patient.s patient/Observation.s", patient: "p1", method: "GET", url: "Patient?_id=p1&_has:Observation:patient:code=1", allow: true, response: true},
	{name: "patient chain criterion", scope: "patient/Observation.s patient/Practitioner.s", patient: "p1", method: "GET", url: "Observation?patient=p1&performer:Practitioner.name=x", allow: true, response: true},
	{name: "user scope beats patient scope", scope: "patient/Observation.rs user/Observation.rs", patient: "p1", method: "GET", url: "Observation?code=1", allow: true},
	{name: "patient execute bot", scope: "patient/Bot.r", patient: "p1", method: "POST", url: "Bot/b1/$execute", allow: true},
	{name: "patient batch own and other", scope: "patient/Patient.r", patient: "p1", method: "POST", url: "", body: batch(entry("GET", "Patient/p1", ""), entry("GET", "Patient/p2", "")), allow: false},
	{name: "patient batch read checked", scope: "patient/Patient.r patient/Observation.r", patient: "p1", method: "POST", url: "", body: batch(entry("GET", "Patient/p1", ""), entry("GET", "Observation/o1", "")), allow: true, response: true},
	{name: "patient batch create other", scope: "patient/Observation.c", patient: "p1", method: "POST", url: "", body: batch(entry("POST", "Observation", obsPat2)), allow: false},
	{name: "patient granular search", scope: "patient/Observation.rs?category=laboratory", patient: "p1", method: "GET", url: "Observation?patient=p1&category=laboratory", allow: true, response: true},
	{name: "patient granular search other category", scope: "patient/Observation.rs?category=laboratory", patient: "p1", method: "GET", url: "Observation?patient=p1&category=vital-signs", allow: false},
}

func testAuthorizer(t testing.TB) *Authorizer {
	t.Helper()
	a, err := New(Options{FHIRBase: "/fhir/R4", Operations: map[string]string{"$match": "s", "$export": "r"}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestDecideTable(t *testing.T) {
	if len(decideCases) < 100 {
		t.Fatalf("the table has %d cases; keep at least 100", len(decideCases))
	}
	a := testAuthorizer(t)
	for _, c := range decideCases {
		t.Run(c.name, func(t *testing.T) {
			req := newRequest(t, c.method, c.url, c.body)
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			d := a.Decide(a.Access(c.scope, c.patient), req)
			if got := d.Denied == nil; got != c.allow {
				msg := ""
				if d.Denied != nil {
					msg = d.Denied.Message
				}
				t.Fatalf("%s %s with %q (patient %q): allowed=%v (%s), want %v", c.method, c.url, c.scope, c.patient, got, msg, c.allow)
			}
			if !c.allow {
				if d.Denied.Status != http.StatusForbidden || d.Denied.Message == "" {
					t.Fatalf("denial %+v: want a 403 with a message", d.Denied)
				}
				return
			}
			if d.CheckResponse != c.response {
				t.Errorf("CheckResponse = %v, want %v", d.CheckResponse, c.response)
			}
			if got := strings.Join(d.Stored, ","); got != c.stored {
				t.Errorf("Stored = %q, want %q", got, c.stored)
			}
		})
	}
}

func TestDenialNamesPermission(t *testing.T) {
	a := testAuthorizer(t)
	d := a.Decide(a.Access("user/Observation.rs", ""), newRequest(t, "POST", "Observation", obsNoSubj))
	if d.Denied == nil || !strings.Contains(d.Denied.Message, "Observation.c") {
		t.Fatalf("denial = %+v, want it to name Observation.c", d.Denied)
	}
	d = a.Decide(a.Access("user/Observation.s", ""), newRequest(t, "GET", "Observation?_include=Observation:patient", ""))
	if d.Denied == nil || !strings.Contains(d.Denied.Message, "Patient.s") || !strings.Contains(d.Denied.Message, "_include") {
		t.Fatalf("denial = %+v, want it to name Patient.s and _include", d.Denied)
	}
}

func TestCheckResponse(t *testing.T) {
	a := testAuthorizer(t)
	acc := a.Access("patient/*.rs", "p1")
	cases := []struct {
		name string
		body string
		ok   bool
	}{
		{"own observation", obsPat1, true},
		{"other observation", obsPat2, false},
		{"observation by performer", `{"resourceType":"Observation","performer":[{"reference":"Patient/p1"}]}`, true},
		{"absolute reference", `{"resourceType":"Observation","subject":{"reference":"https://x/fhir/R4/Patient/p1"}}`, true},
		{"versioned reference", `{"resourceType":"Observation","subject":{"reference":"Patient/p1/_history/3"}}`, true},
		{"own patient", pat1, true},
		{"other patient", `{"resourceType":"Patient","id":"p2"}`, false},
		{"practitioner", `{"resourceType":"Practitioner","id":"d1"}`, true},
		{"unchecked compartment type", `{"resourceType":"AuditEvent","id":"a1"}`, false},
		{"outcome", `{"resourceType":"OperationOutcome"}`, true},
		{"bundle all own", `{"resourceType":"Bundle","entry":[{"resource":` + obsPat1 + `},{"resource":` + pat1 + `}]}`, true},
		{"bundle with an include of another patient", `{"resourceType":"Bundle","entry":[{"resource":` + obsPat1 + `},{"resource":{"resourceType":"Patient","id":"p2"}}]}`, false},
		{"nested bundle", `{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Bundle","entry":[{"resource":` + obsPat2 + `}]}}]}`, false},
		{"appointment participant", `{"resourceType":"Appointment","participant":[{"actor":{"reference":"Patient/p1"}}]}`, true},
		{"not json", `<html>`, false},
		{"no resourceType", `{}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := acc.CheckResponse([]byte(c.body)); (err == nil) != c.ok {
				t.Fatalf("CheckResponse = %v, want ok=%v", err, c.ok)
			}
		})
	}
	if acc.CheckStored("Observation/o1", []byte(obsPat1)) != nil || acc.CheckStored("Observation/o1", []byte(obsPat2)) == nil {
		t.Fatal("CheckStored must accept the patient's Observation and refuse another's")
	}
}

func TestNewRejectsBadOperations(t *testing.T) {
	for _, ops := range []map[string]string{{"match": "s"}, {"$match": "x"}, {"$match": "read"}, {"$a/b": "r"}} {
		if _, err := New(Options{Operations: ops}); err == nil {
			t.Errorf("New(%v) accepted", ops)
		}
	}
}

func TestDecideRefusesAmbiguousSegments(t *testing.T) {
	a := testAuthorizer(t)
	acc := a.Access("user/*.cruds", "")
	for _, segs := range [][]string{
		{"Observation", "1/../../Patient/2"}, {"Observation", `1\..\x`}, {"Observation", "%2e%2e"},
		{"Patient", ".."}, {"Patient", "1\x00"},
	} {
		if d := a.Decide(acc, &Request{Method: "GET", Segments: segs, Query: url.Values{}, Header: http.Header{}}); d.Denied == nil {
			t.Errorf("%q allowed", segs)
		}
	}
}

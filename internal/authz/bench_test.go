package authz

import (
	"net/http"
	"net/url"
	"testing"
)

// benchScopes is the bench harness's realistic scope set (scenario 7).
const benchScopes = "openid offline_access user/Patient.rs user/Observation.rs user/MedicationRequest.rs " +
	"user/Medication.rs user/Encounter.rs user/Condition.read user/Practitioner.rs user/Organization.rs " +
	"user/AllergyIntolerance.rs user/Bot.r"

// BenchmarkDecideSearchTwoIncludes decides a search with two _includes
// against ten scopes, the token's scope already parsed (cached).
func BenchmarkDecideSearchTwoIncludes(b *testing.B) {
	a, err := New(Options{FHIRBase: "/fhir/R4"})
	if err != nil {
		b.Fatal(err)
	}
	q, _ := url.ParseQuery("patient=1&_include=MedicationRequest:medication&_include=MedicationRequest:encounter")
	req := &Request{Method: http.MethodGet, Segments: []string{"MedicationRequest"}, Query: q, Header: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		if d := a.Decide(a.Access(benchScopes, ""), req); d.Denied != nil {
			b.Fatal(d.Denied.Message)
		}
	}
}

// BenchmarkDecideRead decides a plain read against ten scopes.
func BenchmarkDecideRead(b *testing.B) {
	a, err := New(Options{FHIRBase: "/fhir/R4"})
	if err != nil {
		b.Fatal(err)
	}
	req := &Request{Method: http.MethodGet, Segments: []string{"Observation", "1"}, Query: url.Values{}, Header: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		if d := a.Decide(a.Access(benchScopes, ""), req); d.Denied != nil {
			b.Fatal(d.Denied.Message)
		}
	}
}

// BenchmarkParseScopes parses the ten-scope set (a cache miss).
func BenchmarkParseScopes(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(benchScopes); err != nil {
			b.Fatal(err)
		}
	}
}

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// authzScenarioID numbers the authorization scenario.
const authzScenarioID = 10

// authzScopes is a realistic clinician-app scope set: ten resource scopes
// (SMART v1 and v2 mixed) besides openid and offline_access, so every
// request is decided against all of them.
const authzScopes = "openid offline_access user/Patient.rs user/Observation.rs user/MedicationRequest.rs " +
	"user/Medication.rs user/Encounter.rs user/Condition.read user/Practitioner.rs user/Organization.rs " +
	"user/AllergyIntolerance.rs user/Bot.r"

// authzSearchPath is a search with two _includes: three types to decide.
const authzSearchPath = "/fhir/R4/MedicationRequest?patient=1&_include=MedicationRequest:medication&_include=MedicationRequest:encounter"

// medicationSearchJSON is the stand-in backend's answer to any
// MedicationRequest search: a searchset with the request and its includes.
var medicationSearchJSON = []byte(`{"resourceType":"Bundle","type":"searchset","total":1,"entry":[` +
	`{"resource":{"resourceType":"MedicationRequest","id":"mr1","status":"active","intent":"order",` +
	`"subject":{"reference":"Patient/1"},"medicationReference":{"reference":"Medication/m1"},"encounter":{"reference":"Encounter/e1"}},"search":{"mode":"match"}},` +
	`{"resource":{"resourceType":"Medication","id":"m1","code":{"text":"aspirin"}},"search":{"mode":"include"}},` +
	`{"resource":{"resourceType":"Encounter","id":"e1","status":"finished","class":{"code":"AMB"},"subject":{"reference":"Patient/1"}},"search":{"mode":"include"}}]}`)

// authzScenario is scenario 7: the same search with two _includes, with
// a token carrying ten scopes, through reverse_proxy alone and through
// fhirgate (authentication and authorization) + reverse_proxy.
func (h *harness) authzScenario(ctx context.Context, m *mainInstance) (*scenario, error) {
	s := &scenario{ID: authzScenarioID, Short: "authorization", Title: "authorized proxy vs plain proxy (10 scopes, a search with two _includes)"}
	tok, err := exchangeScoped(ctx, m.p.sites.gateway, h.userToken(0, "authz"), authzScopes)
	if err != nil {
		return s, err
	}
	search := func(site string) requestSpec {
		return requestSpec{Method: http.MethodGet, URL: "http://" + site + authzSearchPath, Header: bearer(tok)}
	}
	// The gate must let the search through: a refusal would measure 403s.
	if status, body, err := send(ctx, search(m.p.sites.gateway)); err != nil || status != http.StatusOK {
		return s, fmt.Errorf("the authorized search answered %d (%v): %s", status, err, oneLine(body, 300))
	}
	c := h.set.Concurrency
	plain, gated, err := h.compare(ctx,
		namedLoad{m.p, "7-plain", h.spec(c, search(m.p.sites.plain))},
		namedLoad{m.p, "7-authorized", h.spec(c, search(m.p.sites.gateway))})
	if err != nil {
		return s, err
	}
	s.Measurements = append(s.Measurements,
		&measurement{Label: "plain proxy", Name: fmt.Sprintf("plain reverse_proxy, c=%d", c), Load: plain},
		&measurement{Label: "fhirgate + authz", Name: fmt.Sprintf("fhirgate (10 scopes, 2 _includes) + reverse_proxy, c=%d", c), Load: gated})
	s.Checks = append(s.Checks,
		newCheck(fmt.Sprintf("throughput ratio authorized/plain, c=%d", c), ratio(gated.Throughput, plain.Throughput), ">=", 0.90, ""))
	return s, nil
}

// exchangeScoped is exchange asking for scope.
func exchangeScoped(ctx context.Context, site, subject, scope string) (string, error) {
	r := exchangePOST(site, subject)
	r.Body += "&scope=" + url.QueryEscape(scope)
	return exchangeRequest(ctx, r)
}

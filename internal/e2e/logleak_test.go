package e2e

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// randomMarker is a random string no log line can contain by accident.
func randomMarker(prefix string) string { return prefix + "-" + rand.Text() }

// adminCall sends one admin API request and fails the test on an error status.
func (s *stack) adminCall(t *testing.T, method, path, body string) response {
	t.Helper()
	ct := ""
	if body != "" {
		ct = "application/json"
	}
	r := do(t, method, "http://"+s.adminAddr+path, ct, body)
	if r.status >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, r.status, r.body)
	}
	return r
}

// debugLogs switches the running stack's default logger to DEBUG and turns
// on the gateway's access log, through Caddy's config API (a reload).
func (s *stack) debugLogs(t *testing.T) {
	t.Helper()
	s.adminCall(t, "POST", "/config/logging", `{"logs":{"default":{"level":"DEBUG"}}}`)
	s.adminCall(t, "POST", "/config/apps/http/servers/srv0/logs", `{}`)
}

// TestLogLeakNoSecretsInCaddyOutput runs a full flow with Caddy logging at DEBUG —
// exchange, refresh, introspection, a proxied read, bot runs with every
// content type, a project secret, an async run, failures (a refused
// exchange, a bad refresh token, the legacy endpoint, a thrown error, a
// bogus bearer), revocation and a revoked token — and then searches
// everything Caddy printed for the subject tokens, the tokens issued, the
// secret's value and the bots' input bodies.
func TestLogLeakNoSecretsInCaddyOutput(t *testing.T) {
	s := startStack(t, "bot_timeout 5s")
	s.debugLogs(t)

	// A client whose identity provider knows a random subject token, so the
	// successful exchange's subject token is as distinctive as the rest.
	subject := randomMarker("subject")
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+subject {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"sub":"sub-alice","email":"alice@example.com","email_verified":true}`))
	}))
	t.Cleanup(idp.Close)
	s.adminCall(t, "PUT", "/fhirgate/ClientApplication/leak-app", mustJSON(t, map[string]any{
		"resourceType": "ClientApplication", "name": "leak-app", "meta": map[string]any{"project": "alpha"},
		"identityProvider": map[string]any{"userInfoUrl": idp.URL + "/userinfo"},
	}))

	// A project secret, and a bot that uses it without logging it.
	secret := randomMarker("secret")
	project := s.adminCall(t, "GET", "/fhirgate/Project/alpha", "").json(t)
	project["secret"] = []map[string]any{{"name": "API_KEY", "valueString": secret}}
	s.adminCall(t, "PUT", "/fhirgate/Project/alpha", mustJSON(t, project))
	created := s.adminCall(t, "POST", "/fhirgate/Bot", mustJSON(t, map[string]any{
		"resourceType": "Bot", "name": "secretive", "meta": map[string]any{"project": "alpha"},
	})).json(t)
	secretive := created["id"].(string)
	s.adminCall(t, "POST", "/fhirgate/Bot/"+secretive+"/$deploy", mustJSON(t, map[string]string{"filename": "index.ts", "code": `
import { BotEvent, MedplumClient } from '@medplum/core';
export async function handler(_medplum: MedplumClient, event: BotEvent): Promise<any> {
  console.log('secretive bot ran with', event.contentType);
  const key = event.secrets['API_KEY']?.valueString ?? '';
  return { keyLength: key.length };
}`}))

	var leaks []string // what must never be logged
	tokensOf := func(m map[string]any) (access, refresh string) {
		for _, k := range []string{"access_token", "refresh_token", "id_token"} {
			tok, _ := m[k].(string)
			if tok == "" {
				t.Fatalf("token response without %s: %v", k, m)
			}
			// The whole token and its signature alone: a truncated
			// token in a log line still leaks the signature.
			leaks = append(leaks, tok, tok[strings.LastIndexByte(tok, '.')+1:])
		}
		return m["access_token"].(string), m["refresh_token"].(string)
	}
	form := "application/x-www-form-urlencoded"

	// Exchange, refresh, introspection.
	_, refresh := tokensOf(s.signIn(t, "leak-app", subject))
	r := do(t, "POST", s.gateway+"/oauth2/token", form, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}.Encode())
	if r.status != 200 {
		t.Fatalf("refresh: %d %s", r.status, r.body)
	}
	access, refresh := tokensOf(r.json(t))
	r = do(t, "POST", s.gateway+"/oauth2/introspect", form, url.Values{"token": {access}, "client_id": {"leak-app"}}.Encode())
	if r.status != 200 || r.json(t)["active"] != true {
		t.Fatalf("introspect: %d %s", r.status, r.body)
	}
	auth := []string{"Authorization", "Bearer " + access}

	// A proxied read.
	if r := do(t, "GET", s.gateway+"/fhir/R4/Patient/leak-check", "", "", auth...); r.status != 200 {
		t.Fatalf("proxied read: %d %s", r.status, r.body)
	}

	// Bot runs: every content type, a secret, an async run, a failure.
	echo := s.gateway + "/fhir/R4/Bot/" + s.botID(t, "alpha", "https://example.com/bots|echo") + "/$execute"
	misbehave := s.gateway + "/fhir/R4/Bot/" + s.botID(t, "alpha", "https://example.com/bots|misbehave") + "/$execute"
	inputs := map[string]string{}
	for _, ct := range []string{"text/plain", "application/json", "application/fhir+json", form, "x-application/hl7-v2+er7"} {
		m := randomMarker("input")
		leaks = append(leaks, m)
		inputs[ct] = map[string]string{
			"text/plain":               m,
			"application/json":         `{"marker":"` + m + `"}`,
			"application/fhir+json":    `{"resourceType":"Patient","id":"` + m + `"}`,
			form:                       "marker=" + m,
			"x-application/hl7-v2+er7": "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|" + m + "|P|2.5\rPID|1||" + m + "\r",
		}[ct]
		if r := do(t, "POST", echo, ct, inputs[ct], auth...); r.status != 200 {
			t.Fatalf("echo %s: %d %s", ct, r.status, r.body)
		}
	}
	secretInput := randomMarker("input")
	leaks = append(leaks, secretInput, secret)
	r = do(t, "POST", s.gateway+"/fhir/R4/Bot/"+secretive+"/$execute", "application/json", `{"marker":"`+secretInput+`"}`, auth...)
	if r.status != 200 || r.json(t)["keyLength"] != float64(len(secret)) {
		t.Fatalf("secretive bot: %d %s", r.status, r.body)
	}
	asyncInput := randomMarker("input")
	leaks = append(leaks, asyncInput)
	r = do(t, "POST", echo, "text/plain", asyncInput, append(auth, "Prefer", "respond-async")...)
	if r.status != 202 {
		t.Fatalf("async run: %d %s", r.status, r.body)
	}
	pollJob(t, r.header.Get("Content-Location"), auth, "completed")
	failInput := randomMarker("input")
	leaks = append(leaks, failInput)
	if r := do(t, "POST", misbehave, "application/json", `{"what":"throw","marker":"`+failInput+`"}`, auth...); r.status != 400 {
		t.Fatalf("throwing bot: %d %s", r.status, r.body)
	}

	// Failures that carry secrets of their own.
	failedSubject, badRefresh, legacySubject, bogus := randomMarker("subject"), randomMarker("refresh"), randomMarker("subject"), randomMarker("bearer")
	leaks = append(leaks, failedSubject, badRefresh, legacySubject, bogus)
	r = do(t, "POST", s.gateway+"/oauth2/token", form, url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "client_id": {"leak-app"},
		"subject_token": {failedSubject}, "subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}.Encode())
	if r.status != 400 {
		t.Fatalf("refused exchange: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", s.gateway+"/oauth2/token", form, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {badRefresh}}.Encode()); r.status != 400 {
		t.Fatalf("bad refresh token: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", s.gateway+"/auth/exchange", "application/json",
		mustJSON(t, map[string]string{"clientId": "leak-app", "externalAccessToken": legacySubject})); r.status != 400 {
		t.Fatalf("legacy exchange: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", s.gateway+"/fhir/R4/Patient/1", "", "", "Authorization", "Bearer "+bogus); r.status != 401 {
		t.Fatalf("bogus bearer: %d %s", r.status, r.body)
	}

	// Revocation, then the revoked token.
	if r := do(t, "POST", s.gateway+"/oauth2/revoke", form, url.Values{"token": {refresh}}.Encode()); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", s.gateway+"/fhir/R4/Patient/1", "", "", auth...); r.status != 401 {
		t.Fatalf("revoked token: %d %s", r.status, r.body)
	}

	logs := s.logs()
	// Guard against a vacuous pass: the logs must hold debug and access
	// lines for the requests above.
	if !strings.Contains(logs, `"level":"debug"`) || !strings.Contains(logs, `"logger":"http.log.access`) ||
		!strings.Contains(logs, "/fhir/R4/Patient/leak-check") {
		t.Fatalf("the logs lack debug or access lines; the search would prove nothing:\n%s", logs)
	}
	for _, secret := range leaks {
		if i := strings.Index(logs, secret); i >= 0 {
			line := logs[strings.LastIndexByte(logs[:i], '\n')+1:]
			if j := strings.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
			}
			t.Errorf("the logs contain %.24s…:\n%s", secret, line)
		}
	}
	var lines int
	for _, l := range strings.Split(logs, "\n") {
		if json.Valid([]byte(l)) {
			lines++
		}
	}
	t.Logf("searched %d log lines (%d bytes) for %d secrets", lines, len(logs), len(leaks))
}

package botrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// httpClient is a minimal MedplumClient over HTTP, like the one the gateway supplies.
type httpClient struct{ base string }

func (c httpClient) Do(ctx context.Context, method, path string, query url.Values, body []byte, contentType string, header http.Header) (int, string, []byte, error) {
	u := c.base + "/" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/fhir+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header.Get("Content-Type"), b, err
}

// fhirBackend is a tiny FHIR server: Patient/1 exists, creates get ids, every request is logged.
type fhirBackend struct {
	mu       sync.Mutex
	requests []string // "METHOD /path?query content-type if-none-exist body"
}

func (b *fhirBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.requests = append(b.requests, strings.TrimSpace(fmt.Sprintf("%s %s %s %s %s", r.Method, r.URL.RequestURI(),
		r.Header.Get("Content-Type"), r.Header.Get("If-None-Exist"), body)))
	b.mu.Unlock()
	fhirJSON := func(status int, v string) {
		w.Header().Set("Content-Type", "application/fhir+json; charset=utf-8")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, v)
	}
	switch {
	case r.URL.Path == "/Patient/1" && r.Method == http.MethodGet:
		fhirJSON(200, `{"resourceType":"Patient","id":"1","name":[{"given":["Ann"],"family":"Lee"}]}`)
	case r.URL.Path == "/Observation" && r.Method == http.MethodPost:
		var res map[string]any
		_ = json.Unmarshal(body, &res)
		res["id"] = "obs-1"
		res["meta"] = map[string]any{"versionId": "1"}
		out, _ := json.Marshal(res)
		fhirJSON(201, string(out))
	case r.URL.Path == "/Patient" && r.Method == http.MethodGet:
		fhirJSON(200, `{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{"resourceType":"Patient","id":"1"}},{"resource":{"resourceType":"Patient","id":"2"}}]}`)
	case r.URL.Path == "/Patient/1" && r.Method == http.MethodPatch:
		fhirJSON(200, `{"resourceType":"Patient","id":"1","active":true}`)
	case r.URL.Path == "/Patient/1" && r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/Patient/gone":
		fhirJSON(410, `{"resourceType":"OperationOutcome","id":"gone","issue":[{"severity":"error","code":"deleted","details":{"text":"Gone"}}]}`)
	case r.URL.Path == "/Patient/html-error":
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "  <h1>upstream down</h1>  ")
	case r.URL.Path == "/Patient/slow":
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	case r.URL.Path == "/":
		fhirJSON(200, `{"resourceType":"Bundle","type":"batch-response"}`)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (b *fhirBackend) log() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...)
}

func newBackend(t *testing.T) (*fhirBackend, MedplumClient) {
	t.Helper()
	b := &fhirBackend{}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return b, httpClient{base: srv.URL}
}

func runWithBackend(t *testing.T, client MedplumClient, src string, timeout time.Duration) *Result {
	t.Helper()
	p := mustCompile(t, "index.ts", src)
	res, err := New(Options{}).Run(ctxT(t), Request{Code: p.JS, Timeout: timeout, Event: jsonEvent(t, `{}`), Medplum: client})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestBotReadsAndCreatesThroughTheBackend(t *testing.T) {
	backend, client := newBackend(t)
	src := `import { createReference } from '@medplum/core';
import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Observation, Patient } from '@medplum/fhirtypes';
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<Observation> {
  const patient = await medplum.readResource('Patient', '1') as Patient;
  return medplum.createResource<Observation>({
    resourceType: 'Observation',
    status: 'final',
    code: { text: 'Heart rate' },
    subject: createReference(patient),
    valueQuantity: { value: 72, unit: '/min' },
  });
}`
	res := runWithBackend(t, client, src, 5*time.Second)
	if res.Outcome != OutcomeSuccess {
		t.Fatalf("%v: %s\n%s", res.Outcome, res.Message, res.Console)
	}
	want := `{"resourceType":"Observation","status":"final","code":{"text":"Heart rate"},"subject":{"reference":"Patient/1","display":"Ann Lee"},"valueQuantity":{"value":72,"unit":"/min"},"id":"obs-1","meta":{"versionId":"1"}}`
	var got, exp any
	_ = json.Unmarshal(res.Body, &got)
	_ = json.Unmarshal([]byte(want), &exp)
	if fmt.Sprint(got) != fmt.Sprint(exp) || res.ContentType != ContentTypeFHIR {
		t.Errorf("body = %s (%s)", res.Body, res.ContentType)
	}
	log := backend.log()
	if len(log) != 2 || log[0] != "GET /Patient/1" || !strings.HasPrefix(log[1], `POST /Observation application/fhir+json  {"resourceType":"Observation"`) {
		t.Errorf("backend saw %q", log)
	}
}

func TestMedplumClientMethods(t *testing.T) {
	tests := []struct {
		name    string
		expr    string
		want    string // JSON of the awaited value, or "reject: <message>"
		request string // what the backend saw, if anything
	}{
		{"readReference", `medplum.readReference({ reference: 'Patient/1' }).then((p: any) => p.id)`, `"1"`, "GET /Patient/1"},
		{"readReference bad", `medplum.readReference({ reference: 'Patient' })`, "reject: Unable to parse reference string.", ""},
		{"search with a record", `medplum.search('Patient', { name: 'a b', _count: 2, identifier: ['x', 'y'] }).then((b: any) => b.entry.length)`, `2`,
			"GET /Patient?_count=2&identifier=x&identifier=y&name=a+b"},
		{"search with a string", `medplum.search('Patient', '?name=x&name=y').then((b: any) => b.type)`, `"searchset"`, "GET /Patient?name=x&name=y"},
		{"search with URLSearchParams", `medplum.search('Patient', new URLSearchParams({ gender: 'female' })).then((b: any) => b.type)`, `"searchset"`, "GET /Patient?gender=female"},
		{"search with pairs", `medplum.search('Patient', [['a', '1'], ['a', '2']]).then((b: any) => b.type)`, `"searchset"`, "GET /Patient?a=1&a=2"},
		{"searchOne", `medplum.searchOne('Patient', { name: 'x', _count: 50 }).then((p: any) => p.id)`, `"1"`, "GET /Patient?_count=1&name=x"},
		{"searchResources", `medplum.searchResources('Patient', 'name=x').then((ps: any) => [ps.map((p: any) => p.id), ps.bundle.type])`, `[["1","2"],"searchset"]`, "GET /Patient?name=x"},
		{"createResourceIfNoneExist", `medplum.createResourceIfNoneExist({ resourceType: 'Observation', status: 'final' }, 'identifier=sys|1').then((o: any) => o.id)`, `"obs-1"`,
			`POST /Observation application/fhir+json identifier=sys%7C1 {"resourceType":"Observation","status":"final"}`},
		{"patchResource", `medplum.patchResource('Patient', '1', [{ op: 'add', path: '/active', value: true }]).then((p: any) => p.active)`, `true`,
			`PATCH /Patient/1 application/json-patch+json  [{"op":"add","path":"/active","value":true}]`},
		{"deleteResource", `medplum.deleteResource('Patient', '1')`, `undefined`, "DELETE /Patient/1"},
		{"executeBatch", `medplum.executeBatch({ resourceType: 'Bundle', type: 'batch', entry: [] }).then((b: any) => b.type)`, `"batch-response"`,
			`POST / application/fhir+json  {"resourceType":"Bundle","type":"batch","entry":[]}`},
		{"raw get with Medplum's prefix", `medplum.get('fhir/R4/Patient/1?_elements=id').then((p: any) => p.id)`, `"1"`, "GET /Patient/1?_elements=id"},
		{"raw get of an absolute URL", `medplum.get(new URL('https://medplum.example/fhir/R4/Patient/1')).then((p: any) => p.id)`, `"1"`, "GET /Patient/1"},
		{"ids are escaped", `medplum.readResource('Patient', 'a b')`, "reject: Not found", "GET /Patient/a%20b"},
		{"an id holding a slash is refused", `medplum.readResource('Patient', '../admin')`,
			`reject: invalid FHIR path 'Patient/..%2Fadmin': it has a segment that decodes to a '/' or '\'`, ""},
		{"dot segments refused", `medplum.get('Patient/../../admin')`, "reject: invalid FHIR path 'Patient/../../admin': it has a '.' or '..' segment", ""},
		{"escaped slashes refused", `medplum.get('Patient/..%2f..%2foutside')`,
			`reject: invalid FHIR path 'Patient/..%2f..%2foutside': it has a segment that decodes to a '/' or '\'`, ""},
		{"double-escaped dot segment refused", `medplum.get('Patient/%252e%252e/%252e%252e/outside')`,
			"reject: invalid FHIR path 'Patient/%252e%252e/%252e%252e/outside': it has a '.' or '..' segment", ""},
		{"a refused path is a 400 OperationOutcomeError", `medplum.get('Patient/..%252f').catch((e: any) => [e.constructor === require('@medplum/core').OperationOutcomeError, e.outcome.issue[0].code])`,
			`[true,"invalid"]`, ""},
		{"not found", `medplum.readResource('Patient', 'missing')`, "reject: Not found", "GET /Patient/missing"},
		{"outcome error", `medplum.readResource('Patient', 'gone').catch((e: any) => { throw new Error(e.message + ' ' + e.outcome.id + ' ' + (e instanceof Error)) })`,
			"reject: Gone gone true", "GET /Patient/gone"},
		{"non-JSON error", `medplum.readResource('Patient', 'html-error')`, "reject: <h1>upstream down</h1>", "GET /Patient/html-error"},
		{"caught error is an OperationOutcomeError", `medplum.readResource('Patient', 'missing').catch((e: any) => [e.constructor === require('@medplum/core').OperationOutcomeError, e.outcome.id])`,
			`[true,"not-found"]`, "GET /Patient/missing"},
		{"missing resourceType", `medplum.createResource({} as any)`, "reject: resourceType must be a non-empty string", ""},
		{"updateResource needs an id", `medplum.updateResource({ resourceType: 'Patient' } as any)`, "reject: resource id must be a non-empty string", ""},
		{"executeBot by id", `medplum.executeBot('x', { a: 1 })`, "reject: Not found", `POST /Bot/x/$execute application/fhir+json  {"a":1}`},
		{"executeBot by identifier", `medplum.executeBot({ system: 'https://b', value: 'echo' }, 'hi', 'text/plain')`, "reject: Not found",
			"POST /Bot/$execute?identifier=https%3A%2F%2Fb%7Cecho text/plain  hi"},
		{"executeBot without a bot", `medplum.executeBot(42 as any)`, "reject: executeBot needs a bot id or an identifier {system, value}", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			backend, client := newBackend(t)
			src := `export async function handler(medplum: any) {
  try { return 'ok: ' + JSON.stringify(await (` + tc.expr + `)) } catch (e: any) { return 'reject: ' + e.message }
}`
			res := runWithBackend(t, client, src, 5*time.Second)
			want := tc.want
			if !strings.HasPrefix(want, "reject: ") {
				want = "ok: " + want
			}
			if res.Outcome != OutcomeSuccess || string(res.Body) != want {
				t.Errorf("got %v %q %s, want %q", res.Outcome, res.Body, res.Message, want)
			}
			log := backend.log()
			if tc.request == "" && len(log) > 0 || tc.request != "" && (len(log) != 1 || log[0] != tc.request) {
				t.Errorf("backend saw %q, want %q", log, tc.request)
			}
		})
	}
}

func TestUnreachableBackendErrorsLeaveTheURLOut(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens there any more
	res := runWithBackend(t, httpClient{base: srv.URL}, `export async function handler(medplum: any) {
  return medplum.search('Patient', { identifier: 'ssn|123-45-6789' });
}`, 5*time.Second)
	if res.Outcome != OutcomeError || !strings.HasPrefix(res.Message, "FHIR backend request failed: ") {
		t.Fatalf("%v %q", res.Outcome, res.Message)
	}
	if strings.Contains(res.Message, "6789") || strings.Contains(res.Message, srv.URL) {
		t.Errorf("message %q repeats the request", res.Message)
	}
}

func TestWithoutBackendCallsRejectClearly(t *testing.T) {
	res := runWithBackend(t, nil, `export async function handler(medplum: any) {
  try { await medplum.readResource('Patient', '1') } catch (e: any) { return [e.message, e.outcome.issue[0].code] }
}`, 5*time.Second)
	if string(res.Body) != `["no FHIR backend is configured for bots","not-supported"]` {
		t.Errorf("got %v %s %s", res.Outcome, res.Body, res.Message)
	}
	res = runWithBackend(t, nil, `export async function handler(medplum: any) { return medplum.search('Patient') }`, 5*time.Second)
	if res.Outcome != OutcomeError || res.Message != "no FHIR backend is configured for bots" {
		t.Errorf("unhandled: %v %q", res.Outcome, res.Message)
	}
}

func TestBackendCallsStopAtTheDeadline(t *testing.T) {
	_, client := newBackend(t)
	start := time.Now()
	res := runWithBackend(t, client, `export async function handler(medplum: any) { await medplum.readResource('Patient', 'slow'); return 'late' }`, 300*time.Millisecond)
	if res.Outcome != OutcomeTimeout {
		t.Errorf("outcome = %v (%s), want a timeout", res.Outcome, res.Message)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("the backend call was not cancelled")
	}
}

type panickingClient struct{}

func (panickingClient) Do(context.Context, string, string, url.Values, []byte, string, http.Header) (int, string, []byte, error) {
	panic("client bug")
}

func TestHostPanicsBecomeErrorResults(t *testing.T) {
	r := New(Options{})
	p := mustCompile(t, "index.ts", `export async function handler(medplum: any) { return medplum.readResource('Patient', '1') }`)
	res, err := r.Run(ctxT(t), Request{Code: p.JS, Medplum: panickingClient{}})
	if err != nil || res.Outcome != OutcomeError || res.Message != "internal error in the bot runtime: client bug" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	res, err = r.Run(ctxT(t), Request{Code: `exports.handler = () => 'still fine'`})
	if err != nil || string(res.Body) != "still fine" {
		t.Errorf("next run = %+v, %v", res, err)
	}
}

package botrunner

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hapiBackend answers GET /Patient/{status} with that status and an OperationOutcome as a
// FHIR server other than Medplum writes it (no id, its own wording), /Patient/text-{status} with a
// plain-text body, and /Patient/medplum-409 with Medplum's own conflict outcome.
func hapiBackend(t *testing.T) MedplumClient {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		last := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		if s, ok := strings.CutPrefix(last, "text-"); ok {
			status, _ := strconv.Atoi(s)
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, "backend says "+s)
			return
		}
		w.Header().Set("Content-Type", "application/fhir+json")
		if last == "medplum-409" {
			w.WriteHeader(409)
			_, _ = io.WriteString(w, `{"resourceType":"OperationOutcome","id":"conflict","issue":[{"severity":"error","code":"conflict","details":{"text":"Medplum's words"}}]}`)
			return
		}
		status, _ := strconv.Atoi(last)
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"processing","diagnostics":"HAPI-%d: backend wording"}]}`, status)
	}))
	t.Cleanup(srv.Close)
	return httpClient{base: srv.URL}
}

// A failed call carries Medplum's outcome for the status, so Medplum's tests of outcomes and
// normalizeErrorString give what they give against Medplum's server.
func TestMedplumClientErrorsCarryMedplumsOutcomes(t *testing.T) {
	client := hapiBackend(t)
	for _, tc := range []struct{ id, want string }{
		{"401", `{"id":"unauthorized","msg":"Unauthorized","status":401,"checks":[false,false,false,true,false]}`},
		{"403", `{"id":"forbidden","msg":"Forbidden","status":403,"checks":[false,false,false,false,false]}`},
		{"404", `{"id":"not-found","msg":"Not found","status":404,"checks":[true,false,false,false,false]}`},
		{"409", `{"id":"conflict","msg":"HAPI-409: backend wording","status":409,"checks":[false,false,false,false,true]}`},
		{"medplum-409", `{"id":"conflict","msg":"Medplum's words","status":409,"checks":[false,false,false,false,true]}`},
		{"410", `{"id":"gone","msg":"Gone","status":410,"checks":[false,true,false,false,false]}`},
		{"412", `{"id":"precondition-failed","msg":"Precondition Failed","status":412,"checks":[false,false,false,false,false]}`},
		{"429", `{"id":"too-many-requests","msg":"Too Many Requests","status":429,"checks":[false,false,false,false,false]}`},
		// Statuses Medplum has no outcome id for keep the backend's outcome.
		{"400", `{"msg":"HAPI-400: backend wording","status":400,"checks":[false,false,false,false,false]}`},
		{"422", `{"msg":"HAPI-422: backend wording","status":400,"checks":[false,false,false,false,false]}`},
		{"500", `{"msg":"HAPI-500: backend wording","status":400,"checks":[false,false,false,false,false]}`},
		{"text-404", `{"id":"not-found","msg":"Not found","status":404,"checks":[true,false,false,false,false]}`},
		{"text-503", `{"msg":"backend says 503","status":400,"checks":[false,false,false,false,false]}`},
	} {
		t.Run(tc.id, func(t *testing.T) {
			res := runWithBackend(t, client, `import { getStatus, isConflict, isGone, isNotFound, isOk, isUnauthenticated, normalizeErrorString } from '@medplum/core';
export async function handler(medplum: any) {
  try {
    await medplum.readResource('Patient', '`+tc.id+`');
    return 'no error';
  } catch (err: any) {
    const o = err.outcome;
    return { id: o.id, msg: normalizeErrorString(err), status: getStatus(o), checks: [isNotFound(o), isGone(o), isOk(o), isUnauthenticated(o), isConflict(o)] };
  }
}`, 5*time.Second)
			if res.Outcome != OutcomeSuccess || string(res.Body) != tc.want {
				t.Errorf("got %v %s %s\nwant %s", res.Outcome, res.Body, res.Message, tc.want)
			}
		})
	}
}

// A not-found the bot does not catch reaches the $execute caller as Medplum's outcome.
func TestUncaughtClientErrorIsTheOutcome(t *testing.T) {
	res := runWithBackend(t, hapiBackend(t), `export async function handler(medplum: any) { return medplum.readResource('Patient', '404') }`, 5*time.Second)
	want := `{"resourceType":"OperationOutcome","id":"not-found","issue":[{"severity":"error","code":"not-found","details":{"text":"Not found"}}]}`
	if res.Outcome != OutcomeError || string(res.Body) != want || res.Message != "Not found" {
		t.Errorf("got %v %s %s", res.Outcome, res.Body, res.Message)
	}
}

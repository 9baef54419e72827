//go:build unix

package botapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/cputest"
	"github.com/fhirgate/fhirgate/internal/deploy"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// echoInput is the performance harness's scenario-3 body (322 bytes of JSON).
const echoInput = `{"active":true,"code":{"coding":[{"code":"8867-4","display":"Heart rate","system":"http://loinc.org"}]},` +
	`"id":"bench-1","note":"a trivial JSON input echoed by the bot","status":"final",` +
	`"subject":{"reference":"Patient/1"},"valueQuantity":{"code":"/min","system":"http://unitsofmeasure.org","unit":"beats/minute","value":72}}`

// BenchmarkExecute is a whole $execute of the harness's echo bot behind the
// HTTP layer, in process: bot lookup, body parsing, the run, the response
// and the AuditEvent, written by the audit writer into a real Badger store.
// cpu-µs/op is the process's CPU per run with the audit queue drained at the
// end, so the batched writes and Badger's background work are counted; it is
// steadier than ns/op on a shared machine.
//
// "audit" records every run; "never" is the same bot with
// auditEventTrigger never, so the difference is the AuditEvent's cost.
func BenchmarkExecute(b *testing.B) {
	b.Run("audit", func(b *testing.B) { benchmarkExecute(b, "") })
	b.Run("never", func(b *testing.B) { benchmarkExecute(b, "never") })
}

func benchmarkExecute(b *testing.B, trigger string) {
	bot := &store.Bot{Name: "echo", Identifier: []store.Identifier{{System: "https://bench", Value: "echo"}}, AuditEventTrigger: trigger}
	st, project, c := benchDeployed(b, bot, "export async function handler(medplum, event) {\n  return event.input;\n}\n")
	api, err := New(Options{Store: st, Runner: botrunner.New(botrunner.Options{}), Compiler: c})
	if err != nil {
		b.Fatal(err)
	}
	caller := &oauth.Identity{ProjectID: project.ID, Profile: "Practitioner/0190b3c2-7a1e-7c3d-9f00-000000000001"}
	run := func() {
		r := httptest.NewRequest(http.MethodPost, "/fhir/R4/Bot/$execute?identifier=https://bench%7Cecho", strings.NewReader(echoInput))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		api.Handler(targetOf(r))(w, r, caller, nil)
		if w.Code != http.StatusOK || w.Body.Len() != len(echoInput) {
			b.Fatalf("$execute: %d %s", w.Code, w.Body)
		}
	}
	measureRuns(b, api, run)
}

// benchDeployed opens a store with a project and bot in it, and deploys
// code as the bot's.
func benchDeployed(b *testing.B, bot *store.Bot, code string) (*store.Store, *store.Project, *botrunner.Compiler) {
	b.Helper()
	ctx := context.Background()
	st := storetest.Open(b)
	project := &store.Project{Name: "bench"}
	if err := st.Create(ctx, project, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	bot.Meta.Project = project.ID
	if err := st.Create(ctx, bot, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	c := newCompiler(b)
	if _, err := deploy.Deploy(ctx, st, c, bot.ID, "index.ts", code); err != nil {
		b.Fatal(err)
	}
	return st, project, c
}

// measureRuns runs run once (the program compiled and cached, a worker
// started), then b.N times, and reports the process's CPU per run with
// api's queued AuditEvents written at the end.
func measureRuns(b *testing.B, api *API, run func()) {
	b.Helper()
	run()
	before := cputest.Process(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	api.Shutdown() // writes the queued AuditEvents
	b.StopTimer()
	b.ReportMetric(float64((cputest.Process(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
}

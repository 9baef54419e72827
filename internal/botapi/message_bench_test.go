//go:build unix

package botapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/botrunner/workertest"
	"github.com/fhirgate/fhirgate/internal/cputest"
	"github.com/fhirgate/fhirgate/internal/deploy"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/gateway/gatewaytest"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// benchPatient is the harness's Patient (cmd/fhirgate-bench standins.go,
// createdPatient), about 1.1 KB: what a Subscription hands its bot.
const benchPatient = `{"resourceType":"Patient","id":"1","meta":{"versionId":"1","lastUpdated":"2026-01-15T09:30:00.000Z",` +
	`"profile":["http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient"]},` +
	`"identifier":[{"use":"usual","type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0203","code":"MR","display":"Medical Record Number"}]},` +
	`"system":"urn:oid:1.2.36.146.595.217.0.1","value":"12345","period":{"start":"2001-05-06"},"assigner":{"display":"Acme Healthcare"}}],` +
	`"active":true,"name":[{"use":"official","family":"Chalmers","given":["Peter","James"]},{"use":"usual","given":["Jim"]}],` +
	`"telecom":[{"use":"home"},{"system":"phone","value":"(03) 5555 6473","use":"work","rank":1},{"system":"phone","value":"(03) 3410 5613","use":"mobile","rank":2}],` +
	`"gender":"male","birthDate":"1974-12-25","deceasedBoolean":false,` +
	`"address":[{"use":"home","type":"both","text":"534 Erewhon St PeasantVille, Rainbow, Vic  3999","line":["534 Erewhon St"],` +
	`"city":"PleasantVille","district":"Rainbow","state":"Vic","postalCode":"3999","period":{"start":"1974-12-25"}}],` +
	`"contact":[{"relationship":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0131","code":"N"}]}],` +
	`"name":{"family":"du Marché","given":["Bénédicte"]},"telecom":[{"system":"phone","value":"+33 (237) 998327"}],` +
	`"gender":"female","period":{"start":"2012"}}],"managingOrganization":{"reference":"Organization/1"}}`

// BenchmarkRunMessage is one Subscription bot delivery as the gateway
// runs it (cmd/fhirgate-bench scenario 12): RunMessage of the harness's
// Patient with a Subscription's headers, the writer as caller and the
// Subscription and resource as entities, the bot run in a worker process
// of a Pool (the gateway's default isolation), its medplum client on the
// request-less route, and the AuditEvent written by the audit writer
// into a real Badger store. B/op, allocs/op and cpu-µs/op are the
// gateway's alone (the bot's JavaScript runs in the worker); cpu-µs/op
// has the audit queue drained at the end.
func BenchmarkRunMessage(b *testing.B) {
	ctx := context.Background()
	st := storetest.Open(b)
	project := &store.Project{Name: "bench"}
	if err := st.Create(ctx, project, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	bot := &store.Bot{Name: "subscribed"}
	bot.Meta.Project = project.ID
	if err := st.Create(ctx, bot, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	const code = "export async function handler(medplum, event) {\n  return event.input.id;\n}\n"
	c := newCompiler(b)
	if _, err := deploy.Deploy(ctx, st, c, bot.ID, "index.ts", code); err != nil {
		b.Fatal(err)
	}
	pool, err := botrunner.NewPool(botrunner.PoolOptions{Command: workertest.Command()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pool.Close() })
	var gw *gateway.Gateway
	backends := func(ctx context.Context, id *oauth.Identity) (*gateway.Backend, error) { return gw.BackendFor(ctx, id) }
	api, err := New(Options{Store: st, Runner: pool, Compiler: c, Backends: backends})
	if err != nil {
		b.Fatal(err)
	}
	unused := http.Handler(http.NotFoundHandler())
	gw, err = gateway.New(gateway.Options{FHIRBase: "/fhir/R4", OAuth: gatewaytest.OAuth(b, st), Dispatch: gatewaytest.Site(&unused)})
	if err != nil {
		b.Fatal(err)
	}
	const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	m := Message{
		Project:     project.ID,
		Bot:         "Bot/" + bot.ID,
		ContentType: "application/fhir+json",
		Body:        []byte(benchPatient),
		Header: http.Header{
			"Content-Type":           {"application/fhir+json"},
			"X-Medplum-Subscription": {"0190b3c2-7a1e-7c3d-9f00-00000000a001"},
			"X-Medplum-Interaction":  {"create"},
			"Traceparent":            {trace},
		},
		TraceID: trace,
		Caller:  &oauth.Identity{ProjectID: project.ID, Profile: "Practitioner/0190b3c2-7a1e-7c3d-9f00-000000000001", UserID: "u1", ClientID: "c1"},
		Entity:  []store.Reference{{Reference: "Subscription/0190b3c2-7a1e-7c3d-9f00-00000000a001"}, {Reference: "Patient/1"}},
	}
	run := func() {
		res, err := api.RunMessage(ctx, m)
		if err != nil || res.Outcome != botrunner.OutcomeSuccess || string(res.Body) != "1" {
			b.Fatalf("RunMessage: %v %+v", err, res)
		}
	}
	run() // start the worker and compile the program before measuring
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

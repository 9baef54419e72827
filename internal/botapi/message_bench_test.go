//go:build unix

package botapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/botrunner/workertest"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/gateway/gatewaytest"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// BenchmarkRunMessage is one Subscription bot delivery as the gateway
// runs it (cmd/fhirgate-bench scenario 12): RunMessage of a 1.1 KB
// Patient (gatewaytest.Patient) with a Subscription's headers, the
// writer as caller and the Subscription and resource as entities, the
// bot run in a worker process of a Pool (the gateway's default
// isolation), its medplum client on the request-less route, and the
// AuditEvent written by the audit writer into a real Badger store. B/op,
// allocs/op and cpu-µs/op are the gateway's alone (the bot's JavaScript
// runs in the worker); cpu-µs/op has the audit queue drained at the end.
func BenchmarkRunMessage(b *testing.B) {
	ctx := context.Background()
	bot := &store.Bot{Name: "subscribed"}
	st, project, c := benchDeployed(b, bot, "export async function handler(medplum, event) {\n  return event.input.id;\n}\n")
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
		Body:        gatewaytest.Patient("1"),
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
	measureRuns(b, api, run)
}

package subscription

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/botapi"
	"github.com/fhirgate/fhirgate/internal/cputest"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/gateway/gatewaytest"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/kvqueue"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// countingBots stands in for botapi in the delivery benchmark: it counts
// the runs and keeps nothing, so that the benchmark measures the engine.
type countingBots struct{ runs atomic.Int64 }

func (c *countingBots) RunMessage(context.Context, botapi.Message) (*botrunner.Result, error) {
	c.runs.Add(1)
	return &botrunner.Result{Outcome: botrunner.OutcomeSuccess}, nil
}

func (c *countingBots) RecordAudit(*store.AuditEvent) {}

// benchSubscriptions is the number of bot Subscriptions matching every
// write, as in cmd/fhirgate-bench scenario 12.
const benchSubscriptions = 5

// BenchmarkDeliveryPath measures the engine's bookkeeping per delivery
// on Badger with the store's queue, started: a watched create enqueues
// its trigger, the trigger job matches 5 bot Subscriptions and runs the
// 5 bots (a stand-in that returns at once: the run itself is botapi's,
// BenchmarkExecute), one trigger job's enqueue, claim and outcome for the
// 5. Up to 16 writes are in flight, as under a steady stream. One op is
// one delivery; cpu-µs/delivery is the process's CPU time (user +
// system, all goroutines, Badger's included).
func BenchmarkDeliveryPath(b *testing.B) {
	benchmarkDeliveryPath(b, func(id string) []byte {
		return []byte(`{"resourceType":"Patient","id":"` + id + `","meta":{"versionId":"1"},"name":[{"family":"Doe"}]}`)
	})
}

// BenchmarkDeliveryPath1KB is BenchmarkDeliveryPath with a Patient of
// 1.1 KB, as the harness writes (gatewaytest.Patient): the resource rides
// in the trigger's job args, through the queue's record encoding and
// decoding, to each bot.
func BenchmarkDeliveryPath1KB(b *testing.B) { benchmarkDeliveryPath(b, gatewaytest.Patient) }

// benchmarkDeliveryPath is BenchmarkDeliveryPath writing resource(id).
func benchmarkDeliveryPath(b *testing.B, resource func(id string) []byte) {
	ctx := context.Background()
	st := storetest.Open(b)
	q := kvqueue.New(st.KV(), queue.Options{}, nil)
	jobs, err := RegisterJobs(q)
	if err != nil {
		b.Fatal(err)
	}
	p := &store.Project{Name: "bench"}
	if err := st.Create(ctx, p, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	for range benchSubscriptions {
		sub := &store.Subscription{Status: "active", Criteria: "Patient", Channel: store.SubscriptionChannel{Type: "rest-hook", Endpoint: "Bot/b1"},
			Author: &store.SubscriptionAuthor{Profile: "Practitioner/a"}}
		sub.Meta.Project = p.ID
		if err := st.Create(ctx, sub, store.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	bots := &countingBots{}
	unused := func(context.Context, *oauth.Identity) (Backend, error) {
		return nil, errors.New("no backend in this benchmark")
	}
	svc, err := New(Options{Store: st, Queue: q, Bots: bots, Backends: unused})
	if err != nil {
		b.Fatal(err)
	}
	jobs.Use(svc)
	if err := q.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = q.Stop(c)
	})
	id := &oauth.Identity{ProjectID: p.ID, Profile: "Practitioner/a"}
	w := &gateway.Write{Method: http.MethodPost, Segments: []string{"Patient"}, Identity: id, Header: http.Header{}}
	const inFlight = 16
	writes := (b.N + benchSubscriptions - 1) / benchSubscriptions
	waitFor := func(n int64) {
		deadline := time.Now().Add(time.Minute)
		for bots.runs.Load() < n {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d deliveries after a minute", bots.runs.Load(), n)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	// The backend's answers are built before the timer: their bytes are
	// the backend's, not the engine's.
	resps := make([]*gateway.BackendResponse, writes)
	for i := range resps {
		rid := "p" + strconv.Itoa(i)
		resps[i] = &gateway.BackendResponse{Status: http.StatusCreated, Header: http.Header{"Location": {"Patient/" + rid + "/_history/1"}},
			Body: resource(rid)}
	}
	b.ReportAllocs()
	cpu0 := cputest.Process(b)
	b.ResetTimer()
	for i, resp := range resps {
		waitFor(int64(benchSubscriptions * (i - inFlight)))
		svc.Watch(ctx, w).Done(ctx, resp, false)
	}
	waitFor(int64(benchSubscriptions * writes))
	b.StopTimer()
	delivered := float64(benchSubscriptions * writes)
	b.ReportMetric(float64((cputest.Process(b)-cpu0).Microseconds())/delivered, "cpu-µs/delivery")
}

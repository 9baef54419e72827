package subscription

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"

	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/kvqueue"
	"github.com/fhirgate/fhirgate/internal/queue/riverqueue/riverqueuetest"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// BenchmarkTriggerWindow measures the crash window of a subscribed write:
// the time from the backend's answer to the client's, which is Done (the
// changes read from the answer and the trigger enqueued: committed, or on
// disk with SyncTriggers). A crash inside it loses that write's triggers;
// its client gets no answer.
func BenchmarkTriggerWindow(b *testing.B) {
	for _, mode := range []string{"deferred", "sync"} {
		b.Run("badger/"+mode, func(b *testing.B) {
			st := storetest.Open(b)
			benchmarkWindow(b, st, kvqueue.New(st.KV(), queue.Options{}, nil), mode == "sync")
		})
		b.Run("postgres/"+mode, func(b *testing.B) { benchmarkPostgresWindow(b, mode == "sync") })
	}
}

func benchmarkPostgresWindow(b *testing.B, sync bool) {
	kv, q := riverqueuetest.Open(b, pgkvtest.DSN(b), queue.Options{})
	benchmarkWindow(b, store.New(kv, store.Options{}), q, sync)
}

func benchmarkWindow(b *testing.B, st *store.Store, q queue.Queue, sync bool) {
	ctx := context.Background()
	if _, err := RegisterJobs(q); err != nil { // registered, never started: jobs wait
		b.Fatal(err)
	}
	p := &store.Project{Name: "bench"}
	if err := st.Create(ctx, p, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	sub := &store.Subscription{Status: "active", Criteria: "Patient", Channel: store.SubscriptionChannel{Type: "rest-hook", Endpoint: "Bot/b1"},
		Author: &store.SubscriptionAuthor{Profile: "Practitioner/a"}}
	sub.Meta.Project = p.ID
	if err := st.Create(ctx, sub, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	unused := func(context.Context, *oauth.Identity) (Backend, error) {
		return nil, errors.New("no backend in this benchmark")
	}
	svc, err := New(Options{Store: st, Queue: q, Bots: &botRecorder{}, Backends: unused, SyncTriggers: sync})
	if err != nil {
		b.Fatal(err)
	}
	id := &oauth.Identity{ProjectID: p.ID, Profile: "Practitioner/a"}
	w := &gateway.Write{Method: http.MethodPost, Segments: []string{"Patient"}, Identity: id, Header: http.Header{}}
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		watch := svc.Watch(ctx, w)
		if watch == nil {
			b.Fatal("the write is not watched")
		}
		rid := "p" + strconv.Itoa(i)
		resp := &gateway.BackendResponse{Status: http.StatusCreated, Header: http.Header{"Location": {"Patient/" + rid + "/_history/1"}},
			Body: []byte(`{"resourceType":"Patient","id":"` + rid + `","meta":{"versionId":"1"},"name":[{"family":"Doe"}]}`)}
		b.StartTimer()
		watch.Done(ctx, resp, false)
		b.StopTimer()
	}
}

package botapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/gateway/gatewaytest"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/riverqueue/riverqueuetest"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// replica is a gateway replica on a shared PostgreSQL store: its own pool,
// store and River queue.
type replica struct {
	st *store.Store
	q  queue.Queue
}

func openReplica(t *testing.T, dsn string) *replica {
	t.Helper()
	kv, q := riverqueuetest.Open(t, dsn, queue.Options{PollInterval: 50 * time.Millisecond})
	return &replica{st: store.New(kv, store.Options{}), q: q}
}

// runJobs registers the bot API's jobs on the replica's queue, running
// on api, and starts it.
func (r *replica) runJobs(t *testing.T, api *API) {
	t.Helper()
	if err := RegisterJobs(r.q, r.st, func(string) (*API, error) { return api, nil }, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.q.Stop(ctx)
	})
}

// replicaAPI is another replica's bot API on r, behind its own gateway in
// front of backend: what runs a queued job there.
func replicaAPI(t *testing.T, r *replica, backend string) *API {
	t.Helper()
	var site http.Handler
	var gw *gateway.Gateway
	api, err := New(Options{Store: r.st, Runner: botrunner.New(botrunner.Options{}), Compiler: newCompiler(t), Queue: r.q,
		Backends: func(ctx context.Context, id *oauth.Identity) (*gateway.Backend, error) { return gw.BackendFor(ctx, id) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Shutdown)
	gw, err = gateway.New(gateway.Options{FHIRBase: "/fhir/R4", OAuth: gatewaytest.OAuth(t, r.st), Operations: api.Handler, Dispatch: gatewaytest.Site(&site)})
	if err != nil {
		t.Fatal(err)
	}
	site = gatewaytest.Handler(t, gw, backend)
	return api
}

// TestAsyncJobAcceptedOnOneReplicaRunsOnAnother: on a shared PostgreSQL
// store, an async $execute accepted by replica A (whose queue works no
// jobs) is run by replica B's queue, through B's request-less route as
// the bot, and A's poller gets the result.
func TestAsyncJobAcceptedOnOneReplicaRunsOnAnother(t *testing.T) {
	dsn := pgkvtest.DSN(t)
	a, b := openReplica(t, dsn), openReplica(t, dsn)
	f := newAPIFixtureOn(t, a.st, Options{Queue: a.q})
	bBackend := &apiFixture{}
	bSrv := httptest.NewServer(http.HandlerFunc(bBackend.serveBackend))
	t.Cleanup(bSrv.Close)
	b.runJobs(t, replicaAPI(t, b, bSrv.URL))

	bot := f.deployBot(t, &store.Bot{Name: "self"}, identityBot)
	r := f.serve(t, f.memberToken, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", `{}`, "Prefer", "respond-async")
	if r.status != http.StatusAccepted {
		t.Fatalf("async execute on A: %d %s", r.status, r.body)
	}
	jobID := jobIDOf(r.header.Get("Content-Location"))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p := f.serve(t, f.memberToken, http.MethodGet, "/fhir/R4/job/"+jobID+"/status", "")
		if p.status == http.StatusOK {
			if !strings.Contains(p.body, `\"requester\":\"Practitioner/bob\"`) || !strings.Contains(p.body, `"completed"`) {
				t.Fatalf("job polled on A: %s", p.body)
			}
			break
		}
		if p.status != http.StatusAccepted || time.Now().After(deadline) {
			t.Fatalf("polling on A: %d %s", p.status, p.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(f.backendRequests()); n != 0 {
		t.Errorf("A's backend got %d requests: the job ran on A", n)
	}
	reqs := bBackend.backendRequests()
	if len(reqs) != 2 || reqs[0].Header.Get("X-Fhirgate-Profile") != "Bot/"+bot.ID || reqs[1].Method != http.MethodPost {
		t.Errorf("B's backend got %+v", reqs)
	}
}

package botapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/kvqueue"
	"github.com/fhirgate/fhirgate/internal/queue/riverqueue"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// leaseOptions lets the tests' leases run out quickly.
var leaseOptions = queue.Options{PollInterval: 50 * time.Millisecond, RescueAfter: time.Second}

// startQueue registers the bot API's jobs on q and starts it; the test's
// cleanup stops it.
func startQueue(t *testing.T, q queue.Queue, st *store.Store) {
	t.Helper()
	if err := RegisterJobs(q, st, nil); err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = q.Stop(ctx)
	})
}

// acceptedJob stores an accepted AsyncJob of project.
func acceptedJob(t *testing.T, st *store.Store, project string) *store.AsyncJob {
	t.Helper()
	job := &store.AsyncJob{Status: jobAccepted, Request: "http://gw/fhir/R4/Bot/b/$execute", RequestTime: store.FormatTime(time.Now())}
	job.Meta.Project = project
	if err := st.Create(context.Background(), job, store.PutOptions{TTL: jobRetention}); err != nil {
		t.Fatal(err)
	}
	return job
}

// waitJobStatus polls the stored job until it has left accepted.
func waitJobStatus(t *testing.T, st *store.Store, id string) *store.AsyncJob {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		job, err := store.Get[store.AsyncJob](context.Background(), st, id)
		if err != nil {
			t.Fatal(err)
		}
		if job.Status != jobAccepted {
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s", id, job.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLapsedLeaseFailsOnlyUnfinishedJobs (Badger's queue): a lease that
// runs out marks its job failed, saying the run is not repeated; a job
// that ended first keeps its result.
func TestLapsedLeaseFailsOnlyUnfinishedJobs(t *testing.T) {
	t.Parallel()
	db := storetest.OpenKV(t)
	st := store.New(db, store.Options{})
	q := kvqueue.New(db, leaseOptions, nil)
	ctx := context.Background()
	project := &store.Project{Name: "p"}
	if err := st.Create(ctx, project, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	lapsed := acceptedJob(t, st, project.ID)
	ended := acceptedJob(t, st, project.ID)
	for _, job := range []*store.AsyncJob{lapsed, ended} {
		// A lease nobody renews: its replica died at once.
		if _, err := takeLease(ctx, q, job.ID, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	ended.Status = jobCompleted
	if _, err := st.Put(ctx, ended, store.PutOptions{IfMatch: ended.Meta.VersionID, TTL: jobRetention}); err != nil {
		t.Fatal(err)
	}
	startQueue(t, q, st)

	got := waitJobStatus(t, st, lapsed.ID)
	out := firstParameter(t, got)
	if got.Status != jobError || !strings.Contains(strings.ToLower(outcomeTextOf(out)), "not run again") {
		t.Fatalf("lapsed job: %s %v", got.Status, out)
	}
	// The ended job's lease ran too (the queue is idle once both are done).
	waitIdle(t, q, st)
	if kept, err := store.Get[store.AsyncJob](ctx, st, ended.ID); err != nil || kept.Status != jobCompleted {
		t.Fatalf("ended job: %v %+v", err, kept)
	}
}

// waitIdle waits until no lease job is waiting or running in the KV
// queue's keys.
func waitIdle(t *testing.T, q queue.Queue, st *store.Store) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		n := 0
		err := st.KV().View(context.Background(), func(tx store.Txn) error {
			for _, p := range []string{"w/t/", "w/r/"} {
				if err := tx.Scan([]byte(p), false, func(_, _ []byte) error { n++; return nil }); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs still queued", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func outcomeTextOf(param map[string]any) string {
	res, _ := param["resource"].(map[string]any)
	issues, _ := res["issue"].([]any)
	if len(issues) == 0 {
		return ""
	}
	issue, _ := issues[0].(map[string]any)
	if d, ok := issue["diagnostics"].(string); ok {
		return d
	}
	details, _ := issue["details"].(map[string]any)
	text, _ := details["text"].(string)
	return text
}

// replica is a gateway replica on a shared PostgreSQL store: its own pool,
// store and River queue.
type replica struct {
	kv *pgkv.KV
	st *store.Store
	q  queue.Queue
}

func openReplica(t *testing.T, dsn string) *replica {
	t.Helper()
	return openReplicaWith(t, dsn, nil)
}

// openReplicaWith opens a replica, calling register (when not nil) on its
// queue and store before the queue starts.
func openReplicaWith(t *testing.T, dsn string, register func(queue.Queue, *store.Store)) *replica {
	t.Helper()
	ctx := context.Background()
	kv, err := pgkv.Open(ctx, pgkv.Options{DSN: dsn, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	q, err := riverqueue.New(ctx, kv.Pool(), pgkv.PgxTx, leaseOptions, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(kv, store.Options{})
	if register != nil {
		register(q, st)
	}
	startQueue(t, q, st)
	return &replica{kv: kv, st: st, q: q}
}

// pollOn asks a replica's bot API for the job's status, as the project's
// admin.
func pollOn(t *testing.T, api *API, id *oauth.Identity, jobID string) response {
	t.Helper()
	f := &apiFixture{api: api}
	return f.call(t, id, http.MethodGet, "/fhir/R4/job/"+jobID+"/status", "")
}

// otherAPI is a second replica's bot API on st.
func otherAPI(t *testing.T, st *store.Store, q queue.Queue) *API {
	t.Helper()
	api, err := New(Options{Store: st, Runner: botrunner.New(botrunner.Options{}), Compiler: newCompiler(t), Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Shutdown)
	return api
}

// startSlowAsync deploys the slow bot on replica A's fixture, starts it
// with respond-async and waits until it runs; it returns the job's id.
func startSlowAsync(t *testing.T, f *apiFixture) string {
	t.Helper()
	bot := f.deployBot(t, &store.Bot{Name: "slow"}, slowBot)
	r := f.serve(t, f.adminToken, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", `{}`, "Prefer", "respond-async")
	if r.status != http.StatusAccepted {
		t.Fatalf("async execute: %d %s", r.status, r.body)
	}
	f.waitSlow(t, 1)
	loc := r.header.Get("Content-Location")
	return strings.TrimSuffix(loc[strings.Index(loc, "/job/")+len("/job/"):], "/status")
}

// TestAsyncJobAcrossReplicasOnPostgres: a job started on A is polled on
// B; a replica that starts meanwhile fails nothing, nor does A's lease run
// out while A renews it, however long the run; the result reaches B.
func TestAsyncJobAcrossReplicasOnPostgres(t *testing.T) {
	dsn := pgkvtest.DSN(t)
	a, b := openReplica(t, dsn), openReplica(t, dsn)
	const lease = 900 * time.Millisecond
	f := newAPIFixtureOn(t, a.st, Options{Queue: a.q, AsyncLease: lease})
	apiB := otherAPI(t, b.st, b.q)

	jobID := startSlowAsync(t, f)
	if r := pollOn(t, apiB, f.admin, jobID); r.status != http.StatusAccepted {
		t.Fatalf("polling A's job on B: %d %s", r.status, r.body)
	}
	// A third replica starts while the job runs, and several leases'
	// lengths pass with A alive.
	c := openReplica(t, dsn)
	otherAPI(t, c.st, c.q)
	time.Sleep(4 * lease)
	if r := pollOn(t, apiB, f.admin, jobID); r.status != http.StatusAccepted {
		t.Fatalf("a live replica's job after another started and %s: %d %s", 4*lease, r.status, r.body)
	}
	f.releaseSlow()
	job := waitJobStatus(t, b.st, jobID)
	if param := firstParameter(t, job); job.Status != jobCompleted || param["valueString"] != "Slow" {
		t.Fatalf("job seen on B: %s %v", job.Status, param)
	}
}

// TestDeadReplicasAsyncJobFailedByAnother: replica A dies (its queue and
// its database connections gone) while its async run goes on; its lease
// runs out and B marks the job failed, without running the bot again.
func TestDeadReplicasAsyncJobFailedByAnother(t *testing.T) {
	dsn := pgkvtest.DSN(t)
	a, b := openReplica(t, dsn), openReplica(t, dsn)
	f := newAPIFixtureOn(t, a.st, Options{Queue: a.q, AsyncLease: 900 * time.Millisecond})
	apiB := otherAPI(t, b.st, b.q)

	jobID := startSlowAsync(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = a.q.Stop(ctx)
	_ = a.kv.Close() // A can no longer renew its lease, nor write

	deadline := time.Now().Add(2 * time.Minute)
	for {
		r := pollOn(t, apiB, f.admin, jobID)
		if r.status == http.StatusOK {
			job := r.json(t)
			params, _ := job["output"].(map[string]any)["parameter"].([]any)
			text := outcomeTextOf(params[0].(map[string]any))
			if job["status"] != jobError || !strings.Contains(text, "not run again") {
				t.Fatalf("dead replica's job: %v", job)
			}
			break
		}
		if r.status != http.StatusAccepted || time.Now().After(deadline) {
			t.Fatalf("polling on B: %d %s", r.status, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The bot ran once, on A: only its one read reached the backend.
	f.releaseSlow()
	n := 0
	for _, req := range f.backendRequests() {
		if req.Path == "/fhir/R4/Patient/slow" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the bot read Patient/slow %d times, want once", n)
	}
}

// Package queuetest is the conformance suite of queue.Queue: the same
// cases run against the KV queue on Badger and River on PostgreSQL. It is
// imported by tests only.
//
// A backend's test package runs it with Run and calls Main from its
// TestMain: the crash cases re-run the test binary as a child that is
// killed with SIGKILL while it runs a job.
package queuetest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
)

// Store is one backing store, shared by the queues opened on it.
type Store interface {
	// Open returns a started-later queue on the store (a process, or on a
	// shared backend a replica); the test's cleanup stops it.
	Open(t *testing.T, o queue.Options) queue.Queue
	// Update runs fn in a transaction of the store's KV.
	Update(ctx context.Context, fn func(store.Txn) error) error
	// ChildEnv is the environment a child process needs to open the same
	// store with Backend.OpenChild. The store must not be open in this
	// process while the child runs, unless Backend.Replicas.
	ChildEnv() []string
	// Close releases what the store holds in this process (a Badger
	// directory) so that a child may open it; Reopen takes it back.
	Close(t *testing.T)
	Reopen(t *testing.T)
}

// Backend is an implementation under test.
type Backend struct {
	// NewStore returns an empty store.
	NewStore func(t *testing.T) Store
	// OpenChild opens, in a child process, the store ChildEnv names.
	OpenChild func(o queue.Options) (queue.Queue, error)
	// Replicas says several queues may work one store at once.
	Replicas bool
}

// envChild marks the child process of a crash case.
const envChild = "QUEUETEST_CHILD"

// InChild tells whether this process is a crash case's child.
func InChild() bool { return os.Getenv(envChild) != "" }

// Main runs the tests, or, in a crash case's child, the child's part.
func Main(m *testing.M, b Backend) int {
	if InChild() {
		if err := child(b); err != nil {
			fmt.Fprintln(os.Stderr, "queuetest child:", err)
			return 1
		}
		return 0
	}
	return m.Run()
}

// fast gives the cases quick retries and polls.
func fast() queue.Options {
	return queue.Options{
		Backoff:      func(int) time.Duration { return 10 * time.Millisecond },
		PollInterval: 50 * time.Millisecond,
		RescueAfter:  time.Second,
	}
}

// recorder collects deliveries.
type recorder struct {
	mu  sync.Mutex
	got []queue.Delivery
	ch  chan queue.Delivery
}

func newRecorder() *recorder { return &recorder{ch: make(chan queue.Delivery, 1024)} }

func (r *recorder) add(d *queue.Delivery) {
	r.mu.Lock()
	r.got = append(r.got, *d)
	r.mu.Unlock()
	r.ch <- *d
}

func (r *recorder) worker(fail func(d *queue.Delivery) error) queue.Worker {
	return func(_ context.Context, d *queue.Delivery) error {
		r.add(d)
		if fail != nil {
			return fail(d)
		}
		return nil
	}
}

// withWorker registers on q a worker of kind that records each delivery;
// fail, when not nil, gives each attempt's outcome.
func withWorker(t *testing.T, q queue.Queue, kind string, fail func(d *queue.Delivery) error, o queue.KindOptions) *recorder {
	t.Helper()
	rec := newRecorder()
	if err := q.Register(kind, rec.worker(fail), o); err != nil {
		t.Fatal(err)
	}
	return rec
}

// next waits for a delivery; the bound only ends a test that hangs.
func (r *recorder) next(t *testing.T) queue.Delivery {
	t.Helper()
	select {
	case d := <-r.ch:
		return d
	case <-time.After(2 * time.Minute):
		t.Fatal("no job delivered")
	}
	return queue.Delivery{}
}

func (r *recorder) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, d := range r.got {
		if d.ID == id {
			n++
		}
	}
	return n
}

// jsonEqual compares JSON values: a store may reformat the payload
// (PostgreSQL's jsonb does).
func jsonEqual(got json.RawMessage, want string) bool {
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		return false
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return string(gb) == string(wb)
}

// waitState polls until the job reaches state.
func waitState(t *testing.T, q queue.Queue, id string, want queue.JobState) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		info, err := q.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("Get(%s): %v", id, err)
		}
		if info.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s, want %s", id, info.State, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func start(t *testing.T, q queue.Queue) {
	t.Helper()
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func enqueue(t *testing.T, q queue.Queue, j queue.Job) queue.Enqueued {
	t.Helper()
	res, err := q.Enqueue(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Run runs the conformance suite against b.
func Run(t *testing.T, b Backend) {
	cases := []struct {
		name     string
		replicas bool
		run      func(t *testing.T, b Backend)
	}{
		{"RunsWithArgs", false, runsWithArgs},
		{"RetriesWithBackoffThenCompletes", false, retries},
		{"DiscardsAfterMaxAttempts", false, discards},
		{"UniqueKeyEnqueuesOnce", false, unique},
		{"EnqueueBatchRunsEachOnce", false, enqueueBatch},
		{"ConcurrentEnqueuesUniqueOnce", false, concurrentUnique},
		{"ScheduledJobCancelled", false, scheduledCancel},
		{"EnqueueTxFollowsItsTransaction", false, enqueueTx},
		{"PeriodicOncePerTick", false, periodic},
		{"CrashedJobRescuedAndAckedJobKept", false, crash},
		{"TwoReplicasRunEachJobOnce", true, replicasOnce},
		{"TwoReplicasUniqueOnce", true, replicasUnique},
		{"TwoReplicasPeriodicOncePerTick", true, replicasPeriodic},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.replicas && !b.Replicas {
				t.Skip("the backend is one process")
			}
			c.run(t, b)
		})
	}
}

func runsWithArgs(t *testing.T, b Backend) {
	q := b.NewStore(t).Open(t, fast())
	rec := withWorker(t, q, "echo", nil, queue.KindOptions{})
	res := enqueue(t, q, queue.Job{Kind: "echo", Args: json.RawMessage(`{"n":1}`)}) // before Start: it waits
	start(t, q)
	d := rec.next(t)
	if d.ID != res.ID || !jsonEqual(d.Args, `{"n":1}`) || d.Attempt != 1 || d.Rescued {
		t.Fatalf("delivery %+v, want job %s with its args at attempt 1", d, res.ID)
	}
	waitState(t, q, res.ID, queue.StateCompleted)
	if n := rec.count(res.ID); n != 1 {
		t.Fatalf("job ran %d times", n)
	}
}

func retries(t *testing.T, b Backend) {
	q := b.NewStore(t).Open(t, fast())
	rec := withWorker(t, q, "flaky", func(d *queue.Delivery) error {
		if d.Attempt < 3 {
			return errors.New("not yet")
		}
		return nil
	}, queue.KindOptions{MaxAttempts: 5})
	start(t, q)
	res := enqueue(t, q, queue.Job{Kind: "flaky"})
	for want := 1; want <= 3; want++ {
		if d := rec.next(t); d.Attempt != want || d.MaxAttempts != 5 {
			t.Fatalf("attempt %d/%d, want %d/5", d.Attempt, d.MaxAttempts, want)
		}
	}
	waitState(t, q, res.ID, queue.StateCompleted)
}

func discards(t *testing.T, b Backend) {
	q := b.NewStore(t).Open(t, fast())
	rec := withWorker(t, q, "doomed", func(*queue.Delivery) error { return errors.New("always") }, queue.KindOptions{})
	start(t, q)
	res := enqueue(t, q, queue.Job{Kind: "doomed", MaxAttempts: 2})
	waitState(t, q, res.ID, queue.StateDiscarded)
	if n := rec.count(res.ID); n != 2 {
		t.Fatalf("job ran %d times, want its 2 attempts", n)
	}
}

func unique(t *testing.T, b Backend) {
	q := b.NewStore(t).Open(t, fast())
	rec := withWorker(t, q, "once", nil, queue.KindOptions{})
	first := enqueue(t, q, queue.Job{Kind: "once", UniqueKey: "k"})
	second := enqueue(t, q, queue.Job{Kind: "once", UniqueKey: "k"})
	other := enqueue(t, q, queue.Job{Kind: "once", UniqueKey: "k2"})
	if first.Duplicate || !second.Duplicate || second.ID != first.ID || other.Duplicate || other.ID == first.ID {
		t.Fatalf("enqueues %+v %+v %+v: want the second a duplicate of the first, the third new", first, second, other)
	}
	start(t, q)
	waitState(t, q, first.ID, queue.StateCompleted)
	waitState(t, q, other.ID, queue.StateCompleted)
	// Completed within the retention still holds the key.
	if again := enqueue(t, q, queue.Job{Kind: "once", UniqueKey: "k"}); !again.Duplicate || again.ID != first.ID {
		t.Fatalf("enqueue after completion %+v, want a duplicate of %s", again, first.ID)
	}
	if n := rec.count(first.ID); n != 1 {
		t.Fatalf("unique job ran %d times", n)
	}
}

// concurrentUnique: concurrent Enqueues (which the queue may commit
// together) of one unique key insert one job, the others its duplicates,
// and distinct jobs beside them each run once.
func concurrentUnique(t *testing.T, b Backend) {
	q := b.NewStore(t).Open(t, fast())
	rec := withWorker(t, q, "conc", nil, queue.KindOptions{})
	const n = 40
	res := make([]queue.Enqueued, n)
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res[i], errs[i] = q.Enqueue(context.Background(), queue.Job{Kind: "conc", UniqueKey: "same"})
		})
		wg.Go(func() {
			_, errs[n+i] = q.Enqueue(context.Background(), queue.Job{Kind: "conc", Args: json.RawMessage(fmt.Sprintf("%d", i))})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var inserted []queue.Enqueued
	for _, r := range res {
		if !r.Duplicate {
			inserted = append(inserted, r)
		}
	}
	if len(inserted) != 1 {
		t.Fatalf("%d of %d enqueues of one key inserted a job", len(inserted), n)
	}
	for _, r := range res {
		if r.ID != inserted[0].ID {
			t.Fatalf("a duplicate has id %s, the job %s", r.ID, inserted[0].ID)
		}
	}
	start(t, q)
	for range n + 1 {
		rec.next(t)
	}
	time.Sleep(300 * time.Millisecond) // no late extra run
	rec.mu.Lock()
	got := len(rec.got)
	rec.mu.Unlock()
	if got != n+1 {
		t.Fatalf("%d runs, want %d", got, n+1)
	}
}

// enqueueBatch: a batch runs each job once, a unique key repeated in it or already held once, and a batch
// with a job without a kind enqueues nothing.
func enqueueBatch(t *testing.T, b Backend) {
	q := b.NewStore(t).Open(t, fast())
	rec := withWorker(t, q, "batch", nil, queue.KindOptions{})
	ctx := context.Background()
	held := enqueue(t, q, queue.Job{Kind: "batch", Args: json.RawMessage(`"held"`), UniqueKey: "held"})
	if err := q.EnqueueBatch(ctx, []queue.Job{{Kind: "batch", Args: json.RawMessage(`"lost"`)}, {Args: json.RawMessage(`"no kind"`)}}); err == nil {
		t.Fatal("a batch with a job without a kind was enqueued")
	}
	err := q.EnqueueBatch(ctx, []queue.Job{
		{Kind: "batch", Args: json.RawMessage(`"a"`), UniqueKey: "a"},
		{Kind: "batch", Args: json.RawMessage(`"a again"`), UniqueKey: "a"},
		{Kind: "batch", Args: json.RawMessage(`"b"`)},
		{Kind: "batch", Args: json.RawMessage(`"held again"`), UniqueKey: "held"},
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, q)
	got := map[string]int{}
	for range 3 {
		d := rec.next(t)
		var s string
		_ = json.Unmarshal(d.Args, &s)
		got[s]++
	}
	time.Sleep(300 * time.Millisecond) // no late extra run
	rec.mu.Lock()
	n := len(rec.got)
	rec.mu.Unlock()
	if n != 3 || got["held"] != 1 || got["a"] != 1 || got["b"] != 1 {
		t.Fatalf("ran %d jobs: %v; want held, a and b once each", n, got)
	}
	waitState(t, q, held.ID, queue.StateCompleted)
}

func scheduledCancel(t *testing.T, b Backend) {
	q := b.NewStore(t).Open(t, fast())
	rec := withWorker(t, q, "later", nil, queue.KindOptions{})
	start(t, q)
	res := enqueue(t, q, queue.Job{Kind: "later", UniqueKey: "u", RunAt: time.Now().Add(time.Hour)})
	info, err := q.Get(context.Background(), res.ID)
	if err != nil || info.State != queue.StateScheduled {
		t.Fatalf("Get = %+v, %v; want scheduled", info, err)
	}
	if err := q.Cancel(context.Background(), res.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Get(context.Background(), res.ID); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("a cancelled job: Get = %v, want ErrNotFound", err)
	}
	if err := q.Cancel(context.Background(), res.ID); err != nil && !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("cancelling a cancelled job: %v", err)
	}
	// The key is free again, and the new job runs; the cancelled never.
	again := enqueue(t, q, queue.Job{Kind: "later", UniqueKey: "u"})
	if again.Duplicate {
		t.Fatal("a cancelled job still holds its unique key")
	}
	if d := rec.next(t); d.ID != again.ID {
		t.Fatalf("delivered %s, want %s", d.ID, again.ID)
	}
	if n := rec.count(res.ID); n != 0 {
		t.Fatal("a cancelled job ran")
	}
}

func enqueueTx(t *testing.T, b Backend) {
	s := b.NewStore(t)
	q := s.Open(t, fast())
	rec := withWorker(t, q, "tx", nil, queue.KindOptions{})
	ctx := context.Background()
	rollback := errors.New("rolled back")
	var lost string
	err := s.Update(ctx, func(tx store.Txn) error {
		if err := tx.Set([]byte("queuetest/a"), []byte("1"), 0); err != nil {
			return err
		}
		res, err := q.EnqueueTx(ctx, tx, queue.Job{Kind: "tx", Args: json.RawMessage(`"lost"`)})
		lost = res.ID
		if err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	var kept string
	err = s.Update(ctx, func(tx store.Txn) error {
		if err := tx.Set([]byte("queuetest/b"), []byte("1"), 0); err != nil {
			return err
		}
		res, err := q.EnqueueTx(ctx, tx, queue.Job{Kind: "tx", Args: json.RawMessage(`"kept"`)})
		kept = res.ID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, q)
	if d := rec.next(t); d.ID != kept || !jsonEqual(d.Args, `"kept"`) {
		t.Fatalf("delivered %+v, want the committed job", d)
	}
	waitState(t, q, kept, queue.StateCompleted)
	if _, err := q.Get(ctx, lost); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("the rolled-back job: Get = %v, want ErrNotFound", err)
	}
}

func periodic(t *testing.T, b Backend) {
	q := b.NewStore(t).Open(t, fast())
	rec := withWorker(t, q, "tick", nil, queue.KindOptions{})
	if err := q.AddPeriodic(queue.Periodic{Kind: "tick", Every: time.Second, Args: json.RawMessage(`{"p":1}`)}); err != nil {
		t.Fatal(err)
	}
	start(t, q)
	checkTicks(t, rec, 3)
}

// checkTicks waits for n distinct ticks and checks that none ran twice.
func checkTicks(t *testing.T, rec *recorder, n int) {
	t.Helper()
	seen := map[string]bool{}
	for len(seen) < n {
		d := rec.next(t)
		if seen[d.UniqueKey] {
			t.Fatalf("tick %s ran twice", d.UniqueKey)
		}
		tick, err := time.Parse(time.RFC3339Nano, d.UniqueKey[len("tick:"):])
		if err != nil || !tick.Equal(tick.Truncate(time.Second)) || !jsonEqual(d.Args, `{"p":1}`) {
			t.Fatalf("periodic delivery %+v: want a whole-second tick key and the args", d)
		}
		seen[d.UniqueKey] = true
	}
	// Let another tick pass: a second enqueue of a tick already seen would
	// show now.
	time.Sleep(1500 * time.Millisecond)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	count := map[string]int{}
	for _, d := range rec.got {
		if count[d.UniqueKey]++; count[d.UniqueKey] > 1 {
			t.Fatalf("tick %s ran twice", d.UniqueKey)
		}
	}
}

// crash: a child enqueues a job due later (acknowledged), one Deferred,
// a Deferred batch of one, runs one to completion, and starts another that it runs; it is killed
// with SIGKILL while running it. Then a queue in this process runs the
// first three, the running one again, rescued, and not the completed one:
// a claim and an outcome survive the process (kvqueue commits them
// without waiting for the disk).
func crash(t *testing.T, b Backend) {
	s := b.NewStore(t)
	s.Close(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envChild+"=1"), s.ChildEnv()...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	ids := map[string]string{}
	for lines.Scan() {
		var kind, id string
		if _, err := fmt.Sscan(lines.Text(), &kind, &id); err != nil {
			continue
		}
		ids[kind] = id
		if kind == "running" {
			break
		}
	}
	if ids["durable"] == "" || ids["deferred"] == "" || ids["batch"] == "" || ids["completed"] == "" || ids["running"] == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child did not report its jobs: %v", ids)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	s.Reopen(t)
	q := s.Open(t, fast())
	rec := newRecorder()
	for _, k := range []string{"durable", "deferred", "batch", "done", "crashing"} {
		if err := q.Register(k, rec.worker(nil), queue.KindOptions{Timeout: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	start(t, q)
	got := map[string]queue.Delivery{}
	for len(got) < 4 {
		d := rec.next(t)
		got[d.Kind] = d
	}
	if d := got["durable"]; d.ID != ids["durable"] || d.Attempt != 1 || d.Rescued {
		t.Fatalf("acknowledged job delivered as %+v, want %s at attempt 1", d, ids["durable"])
	}
	if d := got["deferred"]; d.ID != ids["deferred"] || d.Attempt != 1 || d.Rescued {
		t.Fatalf("acknowledged deferred job delivered as %+v, want %s at attempt 1", d, ids["deferred"])
	}
	if d := got["batch"]; !jsonEqual(d.Args, `"`+ids["batch"]+`"`) || d.Attempt != 1 || d.Rescued {
		t.Fatalf("acknowledged deferred batch's job delivered as %+v, want args %q at attempt 1", d, ids["batch"])
	}
	if d := got["crashing"]; d.ID != ids["running"] || d.Attempt != 2 || !d.Rescued {
		t.Fatalf("crashed job delivered as %+v, want %s rescued at attempt 2", d, ids["running"])
	}
	// Rescued before the others ran (kvqueue at Start; River once the
	// lease, shorter than the others' delay, ran out), it would be in got.
	if d, ran := got["done"]; ran {
		t.Fatalf("completed job delivered again as %+v", d)
	}
	if info, err := q.Get(context.Background(), ids["completed"]); err != nil || info.State != queue.StateCompleted {
		t.Fatalf("completed job after the crash: %+v, %v; want completed", info, err)
	}
}

// child is the crash case's child process.
func child(b Backend) error {
	q, err := b.OpenChild(fast())
	if err != nil {
		return err
	}
	running := make(chan string, 1)
	block := func(_ context.Context, d *queue.Delivery) error {
		running <- d.ID
		select {} // until SIGKILL
	}
	if err := q.Register("crashing", block, queue.KindOptions{Timeout: time.Second, MaxAttempts: 3}); err != nil {
		return err
	}
	done := make(chan struct{}, 1)
	complete := func(context.Context, *queue.Delivery) error {
		done <- struct{}{}
		return nil
	}
	if err := q.Register("done", complete, queue.KindOptions{Timeout: time.Second, MaxAttempts: 3}); err != nil {
		return err
	}
	ctx := context.Background()
	// Due after the child is killed (it is as soon as it reports): on
	// PostgreSQL a client fetches every kind, registered or not.
	durable, err := q.Enqueue(ctx, queue.Job{Kind: "durable", RunAt: time.Now().Add(3 * time.Second)})
	if err != nil {
		return err
	}
	fmt.Println("durable", durable.ID)
	// Committed but not waited for to reach the disk: a crash of the
	// process alone must not lose it.
	deferred, err := q.Enqueue(ctx, queue.Job{Kind: "deferred", RunAt: time.Now().Add(3 * time.Second), Deferred: true})
	if err != nil {
		return err
	}
	fmt.Println("deferred", deferred.ID)
	batch := []queue.Job{{Kind: "batch", Args: json.RawMessage(`"b1"`), RunAt: time.Now().Add(3 * time.Second), Deferred: true}}
	if err := q.EnqueueBatch(ctx, batch); err != nil {
		return err
	}
	fmt.Println("batch", "b1")
	completed, err := q.Enqueue(ctx, queue.Job{Kind: "done"})
	if err != nil {
		return err
	}
	if err := q.Start(ctx); err != nil {
		return err
	}
	<-done
	if err := waitCompleted(ctx, q, completed.ID); err != nil {
		return err
	}
	fmt.Println("completed", completed.ID)
	if _, err := q.Enqueue(ctx, queue.Job{Kind: "crashing"}); err != nil {
		return err
	}
	fmt.Println("running", <-running)
	select {}
}

// waitCompleted polls until Get reports the job completed (River records
// an outcome shortly after its worker returns).
func waitCompleted(ctx context.Context, q queue.Queue, id string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := q.Get(ctx, id)
		if err != nil {
			return err
		}
		if info.State == queue.StateCompleted {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s is %s after a minute, want completed", id, info.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func replicasOnce(t *testing.T, b Backend) {
	s := b.NewStore(t)
	a, bq := s.Open(t, fast()), s.Open(t, fast())
	rec := newRecorder()
	for _, q := range []queue.Queue{a, bq} {
		if err := q.Register("shared", rec.worker(nil), queue.KindOptions{}); err != nil {
			t.Fatal(err)
		}
		start(t, q)
	}
	var ids []string
	for i := range 20 {
		ids = append(ids, enqueue(t, a, queue.Job{Kind: "shared", Args: json.RawMessage(fmt.Sprint(i))}).ID)
	}
	for _, id := range ids {
		waitState(t, bq, id, queue.StateCompleted) // polled through B
	}
	for _, id := range ids {
		if n := rec.count(id); n != 1 {
			t.Fatalf("job %s ran %d times", id, n)
		}
	}
}

func replicasUnique(t *testing.T, b Backend) {
	s := b.NewStore(t)
	a, bq := s.Open(t, fast()), s.Open(t, fast())
	rec := newRecorder()
	for _, q := range []queue.Queue{a, bq} {
		if err := q.Register("one", rec.worker(nil), queue.KindOptions{}); err != nil {
			t.Fatal(err)
		}
		start(t, q)
	}
	var inserted atomic.Int32
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := []queue.Queue{a, bq}[i%2]
			res, err := q.Enqueue(context.Background(), queue.Job{Kind: "one", UniqueKey: "same"})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = res.ID
			if !res.Duplicate {
				inserted.Add(1)
			}
		}()
	}
	wg.Wait()
	if inserted.Load() != 1 {
		t.Fatalf("%d of 8 concurrent enqueues of one unique key inserted, want 1", inserted.Load())
	}
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("enqueues returned ids %v, want one", ids)
		}
	}
	waitState(t, a, ids[0], queue.StateCompleted)
	if n := rec.count(ids[0]); n != 1 {
		t.Fatalf("unique job ran %d times", n)
	}
}

func replicasPeriodic(t *testing.T, b Backend) {
	s := b.NewStore(t)
	rec := newRecorder()
	for range 2 {
		q := s.Open(t, fast())
		if err := q.Register("tick", rec.worker(nil), queue.KindOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := q.AddPeriodic(queue.Periodic{Kind: "tick", Every: time.Second, Args: json.RawMessage(`{"p":1}`)}); err != nil {
			t.Fatal(err)
		}
		start(t, q)
	}
	checkTicks(t, rec, 3)
}

// Package kvqueue implements [queue.Queue] in the store's KV: the queue of
// the embedded (Badger) store, worked by the one process that has the
// store open. Every state change is one KV transaction, so a job
// acknowledged by Enqueue survives kill -9, and one a worker was running
// when the process died is rescued when the queue starts again: its
// process is gone (Badger locks its directory to one process). Claims and
// outcomes are committed without waiting for the disk (updateUnsynced):
// only a crash of the machine can lose one, and the job then runs again.
package kvqueue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/groupcommit"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
)

// record is a job as stored.
type record struct {
	ID          string          `json:"id"`
	Kind        string          `json:"kind"`
	Args        json.RawMessage `json:"args,omitempty"`
	UniqueKey   string          `json:"unique_key,omitempty"`
	State       queue.JobState  `json:"state"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	RunAt       time.Time       `json:"run_at"`
	Rescued     bool            `json:"rescued,omitempty"`
	LastError   string          `json:"last_error,omitempty"`
}

type kind struct {
	work queue.Worker
	opts queue.KindOptions
}

// Queue is the KV queue.
type Queue struct {
	kv     store.KV
	o      queue.Options
	logger *zap.Logger

	mu       sync.Mutex
	kinds    map[string]kind
	periodic []queue.Periodic
	started  bool

	group *groupcommit.Group[*groupedWrite]
	// deferred groups the Deferred jobs' Enqueues apart, so that they
	// (a write's answer waits for its trigger's) never wait behind a
	// commit that waits for the disk, nor behind the queue's bookkeeping.
	deferred *groupcommit.Group[*groupedWrite]
	// unsynced groups the other writes that do not wait for the disk:
	// claims, outcomes, Deferred batches (updateUnsynced).
	unsynced *groupcommit.Group[*groupedWrite]
	wake     chan struct{}
	idx      *waitingIndex
	// unindexed says a job was enqueued in a caller's transaction
	// (EnqueueTx): the dispatcher looks into the store for it.
	unindexed atomic.Bool
	slots     chan struct{} // one token per running job
	// claimed hands the dispatcher's jobs to the workers: Workers
	// goroutines that live from Start to Stop. A goroutine per job grew
	// its stack anew for each (a tenth of BenchmarkDeliveryPath's CPU).
	claimed  chan *record
	stopWork sync.Once
	cancel   context.CancelFunc
	loops    sync.WaitGroup // dispatcher and periodic loops
	running  sync.WaitGroup // workers
	// workCtx is the workers' context: cancelled when Stop's ctx ends.
	workCtx    context.Context
	workCancel context.CancelFunc
}

// New returns a queue on kv. logger may be nil.
func New(kv store.KV, o queue.Options, logger *zap.Logger) *Queue {
	if logger == nil {
		logger = zap.NewNop()
	}
	o = o.WithDefaults()
	workCtx, workCancel := context.WithCancel(context.Background())
	q := &Queue{
		kv: kv, o: o, logger: logger,
		kinds:   map[string]kind{},
		wake:    make(chan struct{}, 1),
		idx:     newWaitingIndex(),
		slots:   make(chan struct{}, o.Workers),
		claimed: make(chan *record, o.Workers),

		workCtx: workCtx, workCancel: workCancel,
	}
	q.group = groupcommit.New(maxGroup, func(batch []*groupedWrite) []error {
		return commitGroup(batch, kv.Update)
	})
	q.deferred, q.unsynced = q.group, q.group
	if du, ok := kv.(store.DeferredUpdater); ok {
		commit := func(batch []*groupedWrite) []error {
			return commitGroup(batch, du.UpdateDeferred)
		}
		q.deferred = groupcommit.New(maxGroup, commit)
		q.unsynced = groupcommit.New(maxGroup, commit)
	}
	return q
}

func checkKind(k string) error {
	if k == "" || strings.Contains(k, "/") {
		return fmt.Errorf("job kind %q: must be non-empty and without '/'", k)
	}
	return nil
}

// Register implements queue.Queue.
func (q *Queue) Register(k string, w queue.Worker, o queue.KindOptions) error {
	if err := checkKind(k); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started {
		return errors.New("registering a job kind after the queue started")
	}
	if _, dup := q.kinds[k]; dup {
		return fmt.Errorf("job kind %q is already registered", k)
	}
	q.kinds[k] = kind{work: w, opts: o.WithDefaults()}
	return nil
}

// AddPeriodic implements queue.Queue.
func (q *Queue) AddPeriodic(p queue.Periodic) error {
	if err := checkKind(p.Kind); err != nil {
		return err
	}
	if p.Every <= 0 {
		return fmt.Errorf("periodic job %q: the interval must be positive", p.Kind)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started {
		return errors.New("adding a periodic job after the queue started")
	}
	q.periodic = append(q.periodic, p)
	return nil
}

// Start rescues the jobs that a dead process left running, then works
// jobs and enqueues periodic ones until Stop.
func (q *Queue) Start(ctx context.Context) error {
	q.mu.Lock()
	if q.started {
		q.mu.Unlock()
		return errors.New("the queue is already started")
	}
	q.started = true
	q.mu.Unlock()
	if err := q.rescue(ctx); err != nil {
		return err
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	q.cancel = cancel
	q.loops.Add(1 + len(q.periodic))
	for range q.o.Workers {
		go q.work()
	}
	go q.dispatchLoop(loopCtx)
	for _, p := range q.periodic {
		go q.periodicLoop(loopCtx, p)
	}
	return nil
}

// Stop implements queue.Queue.
func (q *Queue) Stop(ctx context.Context) error {
	q.mu.Lock()
	cancel := q.cancel
	q.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	q.loops.Wait()
	// The dispatcher is gone: the workers end once they ran what it
	// handed them.
	q.stopWork.Do(func() { close(q.claimed) })
	done := make(chan struct{})
	go func() {
		q.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		q.workCancel()
		<-done
		return ctx.Err()
	}
}

// rescue makes every job left running runnable again (or discards it at
// its last attempt): the process that ran it is gone.
func (q *Queue) rescue(ctx context.Context) error {
	var ids []string
	err := q.kv.View(ctx, func(tx store.Txn) error {
		ids = ids[:0]
		return tx.Scan([]byte(prefixRunning), false, func(key, _ []byte) error {
			ids = append(ids, strings.TrimPrefix(string(key), prefixRunning))
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("looking for interrupted jobs: %w", err)
	}
	for _, id := range ids {
		err := q.kv.Update(ctx, func(tx store.Txn) error {
			r, err := readRecord(tx, id)
			if errors.Is(err, queue.ErrNotFound) {
				return tx.Delete(runningKey(id))
			}
			if err != nil || r.State != queue.StateRunning {
				return err
			}
			r.Rescued = true
			r.LastError = "the process running the job stopped before it finished"
			return q.settle(tx, r, time.Now(), nil)
		})
		if err != nil {
			return fmt.Errorf("rescuing job %s: %w", id, err)
		}
	}
	if len(ids) > 0 {
		q.logger.Warn("jobs interrupted by a restart rescued", zap.Int("jobs", len(ids)))
	}
	return nil
}

// settle ends a failed or rescued attempt: the job waits for its next
// attempt after the backoff, or is discarded after its last.
// A waiting job is added to w when w is not nil.
func (q *Queue) settle(tx store.Txn, r *record, now time.Time, w *written) error {
	if err := tx.Delete(runningKey(r.ID)); err != nil {
		return err
	}
	if r.Attempt < r.MaxAttempts {
		r.State = queue.StateAvailable
		r.RunAt = now.Add(q.o.Backoff(r.Attempt))
		wk, err := writeWaiting(tx, r, encodeRecord)
		if err == nil && w != nil {
			*w = append(*w, kindEntry{r.Kind, &entry{key: wk, at: r.RunAt, id: r.ID, r: r}})
		}
		return err
	}
	r.State = queue.StateDiscarded
	return q.finalize(tx, r, false)
}

// finalize stores a finished job for the retention; a completed one keeps
// its unique key as long, a discarded or cancelled one frees it. Its
// payload is not kept: nothing reads a finished job's (Get does not
// report it), and for a Subscription delivery it is the resource, which
// would be written once more per job.
func (q *Queue) finalize(tx store.Txn, r *record, keepUnique bool) error {
	r.Args = nil
	if r.UniqueKey != "" {
		var err error
		if keepUnique {
			err = tx.Set(uniqueKey(r.Kind, r.UniqueKey), []byte(r.ID), q.o.Retention)
		} else {
			err = tx.Delete(uniqueKey(r.Kind, r.UniqueKey))
		}
		if err != nil {
			return err
		}
	}
	return writeRecord(tx, r, q.o.Retention)
}

func readRecord(tx store.Txn, id string) (*record, error) {
	b, err := tx.Get(jobKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, queue.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	r := &record{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("decoding job %s: %w", id, err)
	}
	return r, nil
}

// writeWaiting stores a job that waits for its run: its record, and its
// waiting key holding a copy of it, so that a claim finds the record in
// the scan of the waiting keys instead of reading each job's key (while
// a job waits its record does not change: a claim or a Cancel removes
// the waiting key).
// It returns the waiting key. encode is encodeNewRecord for a job being
// enqueued, else encodeRecord.
func writeWaiting(tx store.Txn, r *record, encode func(*record) ([]byte, error)) (string, error) {
	b, err := encode(r)
	if err != nil {
		return "", err
	}
	if err := tx.Set(jobKey(r.ID), b, 0); err != nil {
		return "", err
	}
	wk := waitingKey(r.RunAt, r.ID)
	return string(wk), tx.Set(wk, b, 0)
}

func writeRecord(tx store.Txn, r *record, ttl time.Duration) error {
	b, err := encodeRecord(r)
	if err != nil {
		return err
	}
	return tx.Set(jobKey(r.ID), b, ttl)
}

// Enqueue implements queue.Queue.
func (q *Queue) Enqueue(ctx context.Context, j queue.Job) (queue.Enqueued, error) {
	g := q.group
	if j.Deferred {
		g = q.deferred
	}
	var (
		res queue.Enqueued
		w   written
	)
	err := g.Do(ctx, &groupedWrite{ctx: ctx, fn: func(tx store.Txn) error {
		w = w[:0]
		var err error
		res, err = q.enqueueTx(tx, j, &w)
		return err
	}})
	if err != nil {
		return queue.Enqueued{}, err
	}
	q.index(w)
	q.notify() // committed: the dispatcher finds it now
	return res, nil
}

// written are the waiting jobs a transaction wrote (with their kinds),
// indexed once it committed.
type written []kindEntry

type kindEntry struct {
	kind string
	e    *entry
}

// index adds committed waiting jobs of registered kinds to the
// dispatcher's index.
func (q *Queue) index(w written) {
	q.mu.Lock()
	kinds := q.kinds
	q.mu.Unlock()
	for _, ke := range w {
		if _, ok := kinds[ke.kind]; ok {
			q.idx.add(ke.e)
		}
	}
}

// EnqueueBatch implements queue.Queue: the jobs in one
// transaction, grouped with concurrent writes (with the unsynced ones
// when every job is Deferred).
func (q *Queue) EnqueueBatch(ctx context.Context, jobs []queue.Job) error {
	update := q.update
	if queue.BatchDeferred(jobs) {
		update = q.updateUnsynced
	}
	var w written
	err := update(ctx, func(tx store.Txn) error {
		w = w[:0]
		for _, j := range jobs {
			if _, err := q.enqueueTx(tx, j, &w); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		q.index(w)
		q.notify()
	}
	return err
}

// EnqueueTx implements queue.Queue: tx is a transaction of the KV the
// queue was made on. The dispatcher finds the job at its next poll (it
// does not know when tx commits).
func (q *Queue) EnqueueTx(_ context.Context, tx store.Txn, j queue.Job) (queue.Enqueued, error) {
	return q.enqueueTx(tx, j, nil)
}

// enqueueTx is EnqueueTx, adding the job written to w when w is not nil.
func (q *Queue) enqueueTx(tx store.Txn, j queue.Job, w *written) (queue.Enqueued, error) {
	if err := checkKind(j.Kind); err != nil {
		return queue.Enqueued{}, err
	}
	if j.UniqueKey != "" {
		held, err := tx.Get(uniqueKey(j.Kind, j.UniqueKey))
		if err == nil {
			return queue.Enqueued{ID: string(held), Duplicate: true}, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return queue.Enqueued{}, fmt.Errorf("checking job uniqueness: %w", err)
		}
	}
	r := &record{
		ID: newID(), Kind: j.Kind, Args: j.Args, UniqueKey: j.UniqueKey,
		State: queue.StateAvailable, MaxAttempts: j.MaxAttempts, RunAt: j.RunAt,
	}
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = q.kindOptions(j.Kind).MaxAttempts
	}
	if r.RunAt.IsZero() {
		r.RunAt = time.Now()
	}
	wk, err := writeWaiting(tx, r, encodeNewRecord)
	if err != nil {
		return queue.Enqueued{}, fmt.Errorf("enqueuing a %s job: %w", j.Kind, err)
	}
	if j.UniqueKey != "" {
		if err := tx.Set(uniqueKey(j.Kind, j.UniqueKey), []byte(r.ID), 0); err != nil {
			return queue.Enqueued{}, fmt.Errorf("enqueuing a %s job: %w", j.Kind, err)
		}
	}
	if w != nil {
		*w = append(*w, kindEntry{r.Kind, &entry{key: wk, at: r.RunAt, id: r.ID, r: r}})
	} else {
		// Wake the dispatcher: after the commit its next look into the
		// store finds the job.
		q.unindexed.Store(true)
		q.notify()
	}
	return queue.Enqueued{ID: r.ID}, nil
}

// kindOptions are a kind's options, the defaults for a kind not
// registered in this process.
func (q *Queue) kindOptions(k string) queue.KindOptions {
	q.mu.Lock()
	defer q.mu.Unlock()
	if kd, ok := q.kinds[k]; ok {
		return kd.opts
	}
	return queue.KindOptions{}.WithDefaults()
}

func (q *Queue) notify() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Cancel implements queue.Queue.
func (q *Queue) Cancel(ctx context.Context, id string) error {
	return q.kv.Update(ctx, func(tx store.Txn) error {
		r, err := readRecord(tx, id)
		if err != nil {
			return err
		}
		switch r.State {
		case queue.StateRunning:
			return queue.ErrRunning
		case queue.StateAvailable:
			// Removed, as River deletes it: nothing of it is kept.
			if err := tx.Delete(waitingKey(r.RunAt, r.ID)); err != nil {
				return err
			}
			if r.UniqueKey != "" {
				if err := tx.Delete(uniqueKey(r.Kind, r.UniqueKey)); err != nil {
					return err
				}
			}
			return tx.Delete(jobKey(r.ID))
		}
		return nil
	})
}

// Get implements queue.Queue.
func (q *Queue) Get(ctx context.Context, id string) (*queue.Info, error) {
	var r *record
	err := q.kv.View(ctx, func(tx store.Txn) error {
		var err error
		r, err = readRecord(tx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	state := r.State
	if state == queue.StateAvailable && r.RunAt.After(time.Now()) {
		state = queue.StateScheduled
	}
	return &queue.Info{ID: r.ID, Kind: r.Kind, State: state, Attempt: r.Attempt, UniqueKey: r.UniqueKey, RunAt: r.RunAt}, nil
}

// newID returns a job id that sorts by creation time.
func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%016x", time.Now().UnixNano()) + hex.EncodeToString(b[:])
}

// Interface guards
var _ queue.Queue = (*Queue)(nil)

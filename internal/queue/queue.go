// Package queue is fhirgate's durable background work: one interface, two
// implementations with the same behaviour (the conformance suite in
// queuetest runs against both).
//
//   - kvqueue keeps its jobs in the store's KV (the embedded Badger store,
//     one process).
//   - riverqueue is River (github.com/riverqueue/river) on PostgreSQL,
//     shared by every replica of the cluster.
//
// A job is a kind, a JSON payload and, optionally, a unique key. Workers
// are registered per kind before Start. The guarantees, on both:
//
//   - Durable: a job whose Enqueue returned nil survives a crash (kill -9)
//     of the process that enqueued it and is run after restart (Badger) or
//     by another replica (PostgreSQL). EnqueueTx writes the job in the same
//     store transaction as the write that causes it: both or neither.
//   - At least once: a worker that returns an error is run again after a
//     backoff, up to the kind's MaxAttempts; then the job is discarded. A
//     worker whose process died mid-run is rescued: its job runs again (the
//     Delivery says Rescued) once the lease — the kind's Timeout, at least
//     Options.RescueAfter — has run out (PostgreSQL), or as soon as the
//     queue starts again (Badger, where a start means the previous process
//     is gone). A job that must not run twice checks Rescued. A job's
//     outcome, once Get reports it, survives a crash of the process; on
//     Badger a crash of the machine within about one disk sync after it
//     can run the job again (the queue's claims and outcomes do not wait
//     for the disk).
//   - Unique: a job with a unique key is not enqueued while another job of
//     the same kind and key is waiting, running or completed within the
//     retention (a discarded or cancelled one frees the key).
//   - Periodic: each tick of a periodic job is enqueued once per cluster
//     (its unique key is the tick time), and run at least once. Ticks
//     missed while no process ran are not replayed.
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
)

// Defaults for Options and KindOptions.
const (
	// DefaultMaxAttempts is a kind's attempts when KindOptions.MaxAttempts
	// is 0.
	DefaultMaxAttempts = 5
	// DefaultTimeout bounds one run of a worker when KindOptions.Timeout is
	// 0.
	DefaultTimeout = time.Minute
	// DefaultRescueAfter is the shortest lease of a running job when
	// Options.RescueAfter is 0.
	DefaultRescueAfter = 5 * time.Minute
	// DefaultWorkers is the number of jobs one process runs at once when
	// Options.Workers is 0. Jobs mostly wait (for the disk's sync of their
	// outcome, a bot slot, a backend, a webhook), so this is well above the
	// CPUs: at 16, one job at a time per slot with two synced commits each
	// held a Subscription's deliveries to 250/s on Badger and 125/s on
	// PostgreSQL on a 2-CPU machine (cmd/fhirgate-bench scenario 12).
	DefaultWorkers = 64
	// DefaultRetention is how long a completed job (and so its unique key)
	// is kept.
	DefaultRetention = 24 * time.Hour
)

// ErrNotFound is returned by Get and Cancel for a job that does not exist
// (or is past its retention).
var ErrNotFound = errors.New("job not found")

// ErrRunning is returned by Cancel for a job that a worker is running.
var ErrRunning = errors.New("job is running")

// Job is work to enqueue.
type Job struct {
	// Kind names the worker that runs the job.
	Kind string
	// Args is the job's JSON payload, handed to the worker as the same
	// JSON value (PostgreSQL may change its spacing and key order). Empty
	// means none.
	Args json.RawMessage
	// UniqueKey, when set, makes the job unique per Kind and key: an
	// Enqueue while another such job is waiting, running or completed
	// within the retention inserts nothing and returns that job's id.
	UniqueKey string
	// RunAt delays the job until then; zero means at once.
	RunAt time.Time
	// MaxAttempts overrides the kind's; 0 keeps it.
	MaxAttempts int
	// Deferred lets Enqueue return before the job is on disk: once it is
	// committed, so it survives a crash of this process, but a crash of
	// the machine (Badger) or of the PostgreSQL server within a short
	// window after the return can lose it — about a tenth of a second on Badger,
	// three times wal_writer_delay on PostgreSQL. The Subscription
	// engine's triggers use it, so that a write's answer does not wait for
	// the disk. Enqueue honours it, and EnqueueBatch when every job of
	// the batch has it (BatchDeferred).
	Deferred bool
}

// BatchDeferred tells whether EnqueueBatch may commit jobs without
// waiting for the disk: every one of them is Deferred.
func BatchDeferred(jobs []Job) bool {
	for _, j := range jobs {
		if !j.Deferred {
			return false
		}
	}
	return len(jobs) > 0
}

// Enqueued is the outcome of an Enqueue.
type Enqueued struct {
	// ID identifies the job: the one inserted, or the existing one that a
	// unique key matched.
	ID string
	// Duplicate says the unique key matched an existing job and nothing
	// was inserted.
	Duplicate bool
}

// Delivery is one attempt at a job, handed to its worker.
type Delivery struct {
	ID        string
	Kind      string
	Args      json.RawMessage
	UniqueKey string
	// Attempt counts from 1; MaxAttempts is the last one.
	Attempt     int
	MaxAttempts int
	// Rescued says the previous attempt's process died while running it
	// (or, on PostgreSQL, held it past its lease): the job may have done
	// part of its work.
	Rescued bool
}

// Worker runs one attempt of a job. A nil error completes the job; an
// error retries it after a backoff, or discards it after its last attempt.
// ctx ends at the kind's Timeout and when the queue stops.
type Worker func(ctx context.Context, d *Delivery) error

// KindOptions configures a kind of job.
type KindOptions struct {
	// MaxAttempts bounds the runs of a job, the first included. 0 means
	// DefaultMaxAttempts.
	MaxAttempts int
	// Timeout bounds one run. 0 means DefaultTimeout.
	Timeout time.Duration
}

// Periodic is a job enqueued on every tick, once per cluster: the ticks
// are the times t.Truncate(Every) == t (for an Every that divides a day,
// aligned on UTC midnight).
type Periodic struct {
	Kind  string
	Every time.Duration
	Args  json.RawMessage
}

// JobState is where a job is in its life.
type JobState string

// Job states. A retried job is waiting again: Available (or Scheduled when
// its backoff has not run out yet).
const (
	StateAvailable JobState = "available"
	StateScheduled JobState = "scheduled"
	StateRunning   JobState = "running"
	StateCompleted JobState = "completed"
	StateDiscarded JobState = "discarded"
	// StateCancelled is River's for a job cancelled outside this
	// interface; Cancel removes the job instead.
	StateCancelled JobState = "cancelled"
)

// Info is what Get reports of a job.
type Info struct {
	ID        string
	Kind      string
	State     JobState
	Attempt   int
	UniqueKey string
	RunAt     time.Time
}

// Queue is a durable job queue. Register workers and periodic jobs, then
// Start; Enqueue may be called before Start (the jobs wait).
type Queue interface {
	// Register sets the worker of a kind. Before Start only.
	Register(kind string, w Worker, o KindOptions) error
	// AddPeriodic adds a periodic job. Before Start only.
	AddPeriodic(p Periodic) error
	// Start begins working jobs and enqueuing periodic ones, after
	// rescuing what a dead process left running.
	Start(ctx context.Context) error
	// Stop stops taking jobs, cancels running workers when ctx ends, and
	// waits for them to return.
	Stop(ctx context.Context) error
	// Enqueue inserts a job; a nil error means it is durable (or, for a
	// Deferred job, committed and soon durable).
	Enqueue(ctx context.Context, j Job) (Enqueued, error)
	// EnqueueBatch inserts jobs in one durable commit: cheaper than a
	// store transaction of EnqueueTx calls (on Badger it is shared with
	// concurrent enqueues, each transaction costing a sync of the
	// write-ahead log; on PostgreSQL it is one INSERT). A nil error means
	// all are durable (committed and soon durable when every job is
	// Deferred); an error, none. A unique key repeated in the batch is
	// inserted once.
	EnqueueBatch(ctx context.Context, jobs []Job) error
	// EnqueueTx inserts a job in tx, a transaction of the store's KV that
	// the queue was opened on: the job exists exactly if tx commits.
	EnqueueTx(ctx context.Context, tx store.Txn, j Job) (Enqueued, error)
	// Cancel removes a job that is waiting (Get then finds nothing).
	// ErrRunning for a running job (it goes on); nil for one already
	// finished or gone.
	Cancel(ctx context.Context, id string) error
	// Get reports a job's state.
	Get(ctx context.Context, id string) (*Info, error)
}

// Backoff is the wait before a job's next attempt after attempt failed:
// 1s, 2s, 4s … capped at an hour.
func Backoff(attempt int) time.Duration {
	return min(time.Second<<min(max(attempt-1, 0), 12), time.Hour)
}

// Options configures either implementation. The zero value gives the
// defaults.
type Options struct {
	// Workers bounds the jobs this process runs at once. 0 means
	// DefaultWorkers.
	Workers int
	// RescueAfter is the shortest lease of a running job: on PostgreSQL, a
	// job running longer than this and its kind's Timeout is taken for
	// dead and rescued by whichever replica leads. 0 means
	// DefaultRescueAfter.
	RescueAfter time.Duration
	// Retention is how long a completed job is kept. 0 means
	// DefaultRetention.
	Retention time.Duration
	// Backoff gives the wait after a failed attempt; nil means Backoff.
	Backoff func(attempt int) time.Duration
	// PollInterval is how often waiting jobs are looked for (besides a
	// local Enqueue, which wakes the workers at once). 0 means a second.
	PollInterval time.Duration
}

// WithDefaults returns o with its zero fields set to the defaults.
func (o Options) WithDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.RescueAfter <= 0 {
		o.RescueAfter = DefaultRescueAfter
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Backoff == nil {
		o.Backoff = Backoff
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	return o
}

// WithDefaults returns o with its zero fields set to the defaults.
func (o KindOptions) WithDefaults() KindOptions {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// TickKey is the unique key of a periodic job's tick.
func TickKey(tick time.Time) string {
	return "tick:" + tick.UTC().Format(time.RFC3339Nano)
}

// ParseTickKey returns the tick of a periodic job's unique key (TickKey);
// ok is false for any other key.
func ParseTickKey(key string) (tick time.Time, ok bool) {
	s, found := strings.CutPrefix(key, "tick:")
	if !found {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// NextTick is the first multiple of every after t.
func NextTick(t time.Time, every time.Duration) time.Time {
	return t.Truncate(every).Add(every)
}

// Package riverqueue implements [queue.Queue] with River
// (github.com/riverqueue/river) on PostgreSQL, for gateway replicas that
// share one database. Every replica runs one Queue on the store's pool:
//
//   - jobs are rows of river_job, inserted in the caller's transaction
//     (EnqueueTx on a pgkv transaction) or alone (Enqueue; a Deferred
//     job on a connection of its own whose commits do not wait for the
//     WAL flush), and fetched by whichever replica has a free worker;
//   - River elects one leader among the replicas; it enqueues periodic
//     jobs (each tick also carries a unique key, so a change of leader
//     cannot enqueue one twice) and rescues jobs running past their lease
//     (the kind's Timeout, at least Options.RescueAfter): a replica that
//     died mid-job has its job run again elsewhere, marked Rescued;
//   - unique keys are River's unique jobs by args (the key alone).
//
// River's tables are created and migrated by [Migrate] (New calls it),
// under a transaction-scoped advisory lock, so replicas starting at once
// migrate once.
package riverqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/fhirgate/fhirgate/internal/groupcommit"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
)

// rescuedError is what River's rescuer records as the error of the
// attempt it rescued (river internal/maintenance/job_rescuer.go).
const rescuedError = "Stuck job rescued by JobRescuer"

// migrateLockKey is the advisory lock taken while River's schema is
// migrated ("fhirgate-river" in hex, truncated to 63 bits).
const migrateLockKey int64 = 0x6668697267617465

// args is every job's River args: the kind is the job's, not the type's,
// and only the unique key takes part in River's uniqueness by args.
type args struct {
	kind      string
	UniqueKey string          `json:"unique_key,omitempty" river:"unique"`
	Payload   json.RawMessage `json:"payload,omitempty"`
}

func (a args) Kind() string { return a.kind }

// TxFunc returns the pgx transaction behind a store transaction (pgkv.PgxTx).
type TxFunc func(store.Txn) (pgx.Tx, error)

// Queue is the River queue of one replica.
type Queue struct {
	pool   *pgxpool.Pool
	txOf   TxFunc
	o      queue.Options
	logger *zap.Logger
	slog   *slog.Logger

	mu       sync.Mutex
	kinds    map[string]queue.KindOptions
	workers  *river.Workers
	periodic []*river.PeriodicJob
	inserter *river.Client[pgx.Tx] // inserts, cancels and reads; works nothing
	inserts  *groupcommit.Group[*insertOp]
	// deferred groups the Deferred jobs' Enqueues, inserted on async.
	deferred *groupcommit.Group[*insertOp]
	// async is the Deferred Enqueues' own connection (a pool of one, so
	// lost connections are replaced), with synchronous_commit off: a
	// group never waits for a connection behind the workers, nor for a
	// BEGIN and a COMMIT. Stop closes it; Deferred Enqueues after Stop
	// are committed durably on the store's pool. asyncMu is held while a
	// group uses it, and by Stop to close it.
	async       *pgxpool.Pool
	asyncMu     sync.RWMutex
	asyncClosed bool
	client      *river.Client[pgx.Tx] // works jobs, from Start
	started     bool
}

// New migrates River's schema and returns a queue on pool. txOf unwraps
// the store transactions given to EnqueueTx. logger may be nil.
func New(ctx context.Context, pool *pgxpool.Pool, txOf TxFunc, o queue.Options, logger *zap.Logger) (*Queue, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	// River logs each start and stop at info; keep its warnings and errors.
	sl := slog.New(zapslog.NewHandler(logger.WithOptions(zap.IncreaseLevel(zap.WarnLevel)).Core()))
	if err := Migrate(ctx, pool, sl); err != nil {
		return nil, err
	}
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: sl})
	if err != nil {
		return nil, fmt.Errorf("creating the River client: %w", err)
	}
	async, err := asyncPool(ctx, pool)
	if err != nil {
		return nil, err
	}
	q := &Queue{
		pool: pool, txOf: txOf, o: o.WithDefaults(), logger: logger, slog: sl,
		kinds: map[string]queue.KindOptions{}, workers: river.NewWorkers(), inserter: inserter, async: async,
	}
	q.inserts = groupcommit.New(maxGroup, q.insertGroup)
	q.deferred = groupcommit.New(maxGroup, q.insertDeferred)
	return q, nil
}

// asyncPool returns a pool of one connection to pool's database whose
// commits do not wait for the WAL flush. It connects on first use.
func asyncPool(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Pool, error) {
	cfg := pool.Config()
	cfg.MaxConns, cfg.MinConns = 1, 0
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	async, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("configuring the deferred jobs' connection: %w", err)
	}
	return async, nil
}

// Migrate creates or migrates River's tables in the pool's schema. Two
// replicas starting at once serialize on an advisory lock, held by a
// connection of its own for the migration's length (River applies each
// version in its own transaction: one adds an enum value that the next
// uses): the second finds nothing left to do.
func Migrate(ctx context.Context, pool *pgxpool.Pool, sl *slog.Logger) error {
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: sl})
	if err != nil {
		return fmt.Errorf("preparing River's migrations: %w", err)
	}
	lock, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrating River's schema: %w", err)
	}
	defer lock.Release()
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLockKey); err != nil {
		return fmt.Errorf("locking River's migrations: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := lock.Exec(uctx, "SELECT pg_advisory_unlock($1)", migrateLockKey); err != nil {
			// The lock is the session's: a connection that cannot say
			// so is closed, which releases it.
			_ = lock.Conn().Close(uctx)
		}
	}()
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrating River's schema: %w", err)
	}
	return nil
}

// worker adapts a queue.Worker to River.
type worker struct {
	river.WorkerDefaults[args]
	fn      queue.Worker
	timeout time.Duration
	backoff func(int) time.Duration
}

func (w *worker) Timeout(*river.Job[args]) time.Duration { return w.timeout }

func (w *worker) NextRetry(j *river.Job[args]) time.Time {
	return time.Now().Add(w.backoff(j.Attempt))
}

func (w *worker) Work(ctx context.Context, j *river.Job[args]) error {
	return w.fn(ctx, delivery(j.JobRow, j.Args))
}

func delivery(row *rivertype.JobRow, a args) *queue.Delivery {
	d := &queue.Delivery{
		ID: strconv.FormatInt(row.ID, 10), Kind: row.Kind, Args: a.Payload, UniqueKey: a.UniqueKey,
		Attempt: row.Attempt, MaxAttempts: row.MaxAttempts,
	}
	if n := len(row.Errors); n > 0 && row.Errors[n-1].Error == rescuedError {
		d.Rescued = true
	}
	return d
}

// Register implements queue.Queue.
func (q *Queue) Register(kind string, w queue.Worker, o queue.KindOptions) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.client != nil || q.started {
		return errors.New("registering a job kind after the queue started")
	}
	o = o.WithDefaults()
	if _, dup := q.kinds[kind]; dup || kind == "" {
		return fmt.Errorf("job kind %q is empty or already registered", kind)
	}
	river.AddWorkerArgs(q.workers, args{kind: kind}, river.Worker[args](&worker{fn: w, timeout: o.Timeout, backoff: q.o.Backoff}))
	q.kinds[kind] = o
	return nil
}

// AddPeriodic implements queue.Queue. The tick is the schedule's: the
// multiples of Every.
func (q *Queue) AddPeriodic(p queue.Periodic) error {
	if p.Kind == "" || p.Every <= 0 {
		return fmt.Errorf("periodic job %q: needs a kind and a positive interval", p.Kind)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.client != nil || q.started {
		return errors.New("adding a periodic job after the queue started")
	}
	every := p.Every
	q.periodic = append(q.periodic, river.NewPeriodicJob(tickSchedule(every), func() (river.JobArgs, *river.InsertOpts) {
		tick := time.Now().Truncate(every)
		a, opts := q.insertOpts(queue.Job{Kind: p.Kind, UniqueKey: queue.TickKey(tick), Args: p.Args})
		return a, opts
	}, &river.PeriodicJobOpts{ID: p.Kind}))
	return nil
}

// fetchCooldown is the shortest time between two fetches of jobs. River's
// default (100 ms) caps a replica at Workers jobs per 100 ms whenever its
// workers are all busy: below a Subscription engine's 1000 deliveries/s.
const fetchCooldown = 10 * time.Millisecond

// tickSchedule fires at the multiples of an interval.
type tickSchedule time.Duration

func (s tickSchedule) Next(t time.Time) time.Time { return queue.NextTick(t, time.Duration(s)) }

// Start implements queue.Queue: it creates this replica's working client,
// which joins the leader election (so the rescue and the periodic jobs).
func (q *Queue) Start(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.client != nil || q.started {
		return errors.New("the queue is already started")
	}
	jobTimeout := queue.DefaultTimeout
	for _, o := range q.kinds {
		jobTimeout = max(jobTimeout, o.Timeout)
	}
	cfg := &river.Config{
		Logger:                      q.slog,
		Workers:                     q.workers,
		Queues:                      map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: q.o.Workers}},
		PeriodicJobs:                q.periodic,
		RescueStuckJobsAfter:        q.o.RescueAfter,
		JobTimeout:                  min(jobTimeout, q.o.RescueAfter),
		CompletedJobRetentionPeriod: q.o.Retention,
		FetchPollInterval:           q.o.PollInterval,
		FetchCooldown:               min(fetchCooldown, q.o.PollInterval),
	}
	if len(q.kinds) == 0 {
		// River starts no client without workers: this replica inserts
		// only, and leaves the rescue and the periodic jobs to the others.
		if len(q.periodic) > 0 {
			return errors.New("periodic jobs need their kind's worker registered")
		}
		q.started = true
		return nil
	}
	c, err := river.NewClient(riverpgxv5.New(q.pool), cfg)
	if err != nil {
		return fmt.Errorf("creating the River client: %w", err)
	}
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("starting the River client: %w", err)
	}
	q.client = c
	return nil
}

// Stop implements queue.Queue: River's graceful stop, then, when ctx
// ends first, a stop that cancels the running jobs. It closes the
// Deferred Enqueues' connection.
func (q *Queue) Stop(ctx context.Context) error {
	q.mu.Lock()
	c := q.client
	q.mu.Unlock()
	defer q.closeAsync()
	if c == nil {
		return nil
	}
	err := c.Stop(ctx)
	if ctx.Err() == nil {
		return err
	}
	hard, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.StopAndCancel(hard)
	return ctx.Err()
}

// insertOpts maps a job onto River's insert options.
func (q *Queue) insertOpts(j queue.Job) (args, *river.InsertOpts) {
	q.mu.Lock()
	o, ok := q.kinds[j.Kind]
	q.mu.Unlock()
	if !ok {
		o = queue.KindOptions{}.WithDefaults()
	}
	opts := &river.InsertOpts{MaxAttempts: o.MaxAttempts, ScheduledAt: j.RunAt}
	if j.MaxAttempts > 0 {
		opts.MaxAttempts = j.MaxAttempts
	}
	if j.UniqueKey != "" {
		opts.UniqueOpts = river.UniqueOpts{ByArgs: true}
	}
	return args{kind: j.Kind, UniqueKey: j.UniqueKey, Payload: j.Args}, opts
}

func enqueued(res *rivertype.JobInsertResult) queue.Enqueued {
	return queue.Enqueued{ID: strconv.FormatInt(res.Job.ID, 10), Duplicate: res.UniqueSkippedAsDuplicate}
}

// Enqueue implements queue.Queue. Concurrent Enqueues share one INSERT
// and one commit (groupcommit): each commit waits for PostgreSQL's WAL
// flush, and a subscribed write's answer waits for its Enqueue.
func (q *Queue) Enqueue(ctx context.Context, j queue.Job) (queue.Enqueued, error) {
	if j.Kind == "" {
		return queue.Enqueued{}, errors.New("enqueuing a job without a kind")
	}
	op := &insertOp{ctx: ctx, job: j}
	g := q.inserts
	if j.Deferred {
		g = q.deferred
	}
	if err := g.Do(ctx, op); err != nil {
		return queue.Enqueued{}, err
	}
	return op.res, nil
}

// maxGroup bounds the Enqueues that share one INSERT.
const maxGroup = 64

// insertOp is one Enqueue waiting for a shared INSERT.
type insertOp struct {
	ctx context.Context
	job queue.Job
	res queue.Enqueued
}

// insertGroup inserts a group of Enqueues in one statement; a unique key
// repeated in the group is inserted once, and the later ones are its
// duplicates, as if enqueued one after the other. If the statement fails,
// each is inserted on its own so that only a failing one fails.
func (q *Queue) insertGroup(batch []*insertOp) []error {
	errs := make([]error, len(batch))
	if len(batch) > 1 {
		jobs := make([]queue.Job, len(batch))
		for i, op := range batch {
			jobs[i] = op.job
		}
		params, at, dup := q.manyParams(jobs)
		res, err := q.inserter.InsertMany(context.Background(), params)
		if err == nil && len(res) == len(params) {
			for i, op := range batch {
				op.res = enqueued(res[at[i]])
				op.res.Duplicate = op.res.Duplicate || dup[i]
			}
			return errs
		}
	}
	for i, op := range batch {
		a, opts := q.insertOpts(op.job)
		res, err := q.inserter.Insert(op.ctx, a, opts)
		if err != nil {
			errs[i] = fmt.Errorf("enqueuing a %s job: %w", op.job.Kind, err)
			continue
		}
		op.res = enqueued(res)
	}
	return errs
}

// closeAsync closes the Deferred Enqueues' connection once no group uses
// it.
func (q *Queue) closeAsync() {
	q.asyncMu.Lock()
	defer q.asyncMu.Unlock()
	if !q.asyncClosed {
		q.asyncClosed = true
		q.async.Close()
	}
}

// insertDeferred inserts a group of Deferred Enqueues with River's INSERT
// as a statement of its own on the async connection, whose commit does
// not wait for the WAL flush: the server has the jobs at once, and a
// crash of PostgreSQL or its machine within about three times
// wal_writer_delay can lose them. If it fails, each is inserted alone so
// that only a failing one fails. After Stop, the group is committed
// durably instead.
//
// River sends its insert notification, when it sends one, after the
// INSERT has committed: if that fails, the group's jobs are inserted again
// one by one, as when a COMMIT's answer is lost.
func (q *Queue) insertDeferred(batch []*insertOp) []error {
	q.asyncMu.RLock()
	defer q.asyncMu.RUnlock()
	if q.asyncClosed {
		return q.insertGroup(batch)
	}
	errs := make([]error, len(batch))
	if len(batch) > 1 {
		if q.insertAsync(context.Background(), batch) == nil {
			return errs
		}
	}
	for i, op := range batch {
		if err := q.insertAsync(op.ctx, batch[i:i+1]); err != nil {
			errs[i] = fmt.Errorf("enqueuing a %s job: %w", op.job.Kind, err)
		}
	}
	return errs
}

// deferredTx begins a transaction whose COMMIT does not wait for the WAL
// flush, in one round trip (a simple-protocol query of two statements).
var deferredTx = pgx.TxOptions{BeginQuery: `BEGIN; SET LOCAL synchronous_commit = off`}

// insertAsync inserts ops in one statement on the async connection and
// sets their results.
func (q *Queue) insertAsync(ctx context.Context, ops []*insertOp) error {
	jobs := make([]queue.Job, len(ops))
	for i, op := range ops {
		jobs[i] = op.job
	}
	params, at, dup := q.manyParams(jobs)
	c, err := q.async.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	res, err := q.inserter.InsertManyTx(ctx, autocommit{c.Conn()}, params)
	if err != nil {
		return err
	}
	if len(res) != len(params) {
		return fmt.Errorf("River inserted %d rows of %d", len(res), len(params))
	}
	for i, op := range ops {
		op.res = enqueued(res[at[i]])
		op.res.Duplicate = op.res.Duplicate || dup[i]
	}
	return nil
}

// EnqueueBatch implements queue.Queue: one INSERT of every job in one
// transaction, instead of a statement each; committed with
// synchronous_commit off when every job is Deferred.
func (q *Queue) EnqueueBatch(ctx context.Context, jobs []queue.Job) error {
	for _, j := range jobs {
		if j.Kind == "" {
			return errors.New("enqueuing a job without a kind")
		}
	}
	params, _, _ := q.manyParams(jobs)
	if len(params) == 0 {
		return nil
	}
	if queue.BatchDeferred(jobs) {
		err := pgx.BeginTxFunc(ctx, q.pool, deferredTx, func(tx pgx.Tx) error {
			_, err := q.inserter.InsertManyTx(ctx, tx, params)
			return err
		})
		if err != nil {
			return fmt.Errorf("enqueuing %d jobs: %w", len(params), err)
		}
		return nil
	}
	if _, err := q.inserter.InsertMany(ctx, params); err != nil {
		return fmt.Errorf("enqueuing %d jobs: %w", len(params), err)
	}
	return nil
}

// manyParams are the rows of one INSERT of jobs: a unique key repeated
// among them is one row (a statement cannot insert a key twice), the
// later jobs its duplicates, as if enqueued one after the other. at is
// each job's row, dup whether it is such a later job.
func (q *Queue) manyParams(jobs []queue.Job) (params []river.InsertManyParams, at []int, dup []bool) {
	at, dup = make([]int, len(jobs)), make([]bool, len(jobs))
	first := map[[2]string]int{}
	for i, j := range jobs {
		if j.UniqueKey != "" {
			k := [2]string{j.Kind, j.UniqueKey}
			if n, ok := first[k]; ok {
				at[i], dup[i] = n, true
				continue
			}
			first[k] = len(params)
		}
		a, opts := q.insertOpts(j)
		at[i] = len(params)
		params = append(params, river.InsertManyParams{Args: a, InsertOpts: opts})
	}
	return params, at, dup
}

// EnqueueTx implements queue.Queue: tx is a transaction of the pgkv store
// on the queue's pool, and the job is a row written in it.
func (q *Queue) EnqueueTx(ctx context.Context, tx store.Txn, j queue.Job) (queue.Enqueued, error) {
	if j.Kind == "" {
		return queue.Enqueued{}, errors.New("enqueuing a job without a kind")
	}
	ptx, err := q.txOf(tx)
	if err != nil {
		return queue.Enqueued{}, fmt.Errorf("enqueuing a %s job: %w", j.Kind, err)
	}
	a, opts := q.insertOpts(j)
	res, err := q.inserter.InsertTx(ctx, ptx, a, opts)
	if err != nil {
		return queue.Enqueued{}, fmt.Errorf("enqueuing a %s job: %w", j.Kind, err)
	}
	return enqueued(res), nil
}

func parseID(id string) (int64, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return 0, queue.ErrNotFound
	}
	return n, nil
}

// Cancel implements queue.Queue.
func (q *Queue) Cancel(ctx context.Context, id string) error {
	n, err := parseID(id)
	if err != nil {
		return err
	}
	row, err := q.inserter.JobGet(ctx, n)
	if errors.Is(err, river.ErrNotFound) {
		return queue.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("reading job %s: %w", id, err)
	}
	switch row.State {
	case rivertype.JobStateRunning:
		return queue.ErrRunning
	case rivertype.JobStateCompleted, rivertype.JobStateDiscarded, rivertype.JobStateCancelled:
		return nil
	}
	// Deleting (not River's cancel, which lets a running job finish and
	// keeps the row) frees its unique key at once. A job that a worker
	// fetched meanwhile is refused by JobDelete.
	_, err = q.inserter.JobDelete(ctx, n)
	if errors.Is(err, rivertype.ErrJobRunning) {
		return queue.ErrRunning
	}
	if err != nil && !errors.Is(err, river.ErrNotFound) {
		return fmt.Errorf("cancelling job %s: %w", id, err)
	}
	return nil
}

// Get implements queue.Queue.
func (q *Queue) Get(ctx context.Context, id string) (*queue.Info, error) {
	n, err := parseID(id)
	if err != nil {
		return nil, err
	}
	row, err := q.inserter.JobGet(ctx, n)
	if errors.Is(err, river.ErrNotFound) {
		return nil, queue.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading job %s: %w", id, err)
	}
	var a args
	_ = json.Unmarshal(row.EncodedArgs, &a)
	return &queue.Info{ID: id, Kind: row.Kind, State: state(row.State), Attempt: row.Attempt, UniqueKey: a.UniqueKey, RunAt: row.ScheduledAt}, nil
}

// state maps River's states onto the queue's.
func state(s rivertype.JobState) queue.JobState {
	switch s {
	case rivertype.JobStateRunning:
		return queue.StateRunning
	case rivertype.JobStateCompleted:
		return queue.StateCompleted
	case rivertype.JobStateDiscarded:
		return queue.StateDiscarded
	case rivertype.JobStateCancelled:
		return queue.StateCancelled
	case rivertype.JobStateScheduled, rivertype.JobStateRetryable, rivertype.JobStatePending:
		return queue.StateScheduled
	}
	return queue.StateAvailable
}

// Interface guards
var _ queue.Queue = (*Queue)(nil)

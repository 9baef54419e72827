package botrunner

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Defaults for the zero values of Options.
const (
	DefaultQueueTimeout     = time.Second
	DefaultTimeout          = 10 * time.Second
	DefaultMaxConsoleBytes  = 64 << 10
	DefaultMaxResultBytes   = 10 << 20
	DefaultProgramCacheSize = 1024
)

// abandonGrace is how long Run keeps waiting after interrupting a bot. goja stops JavaScript at
// once, but not a long native call (a huge JSON.stringify, a backtracking regular expression);
// after the grace period Run answers anyway and the run keeps its slot until it really ends.
const abandonGrace = time.Second

// ErrBusy means every slot stayed taken for QueueTimeout. Answer 429 with Retry-After.
var ErrBusy = errors.New("bot runner is busy: too many concurrent bot runs")

// Options configures a Runner. The zero value means defaults.
type Options struct {
	// MaxConcurrent bounds simultaneous runs across all bots. Default: 4 × GOMAXPROCS.
	MaxConcurrent int
	// ProjectMaxConcurrent bounds the simultaneous runs of one project (Request.Project), so
	// that another project always finds a slot. Default: half of MaxConcurrent, at least 1;
	// negative: no bound but MaxConcurrent.
	ProjectMaxConcurrent int
	// QueueTimeout is how long a run waits for a slot before Run returns ErrBusy. Default: 1s.
	QueueTimeout time.Duration
	// DefaultTimeout is the wall-clock limit of a run whose Request has none. Default: 10s.
	DefaultTimeout time.Duration
	// MaxTimeout bounds every run's wall-clock limit: a longer Request.Timeout is cut to it.
	// Default: 15m; negative: no bound.
	MaxTimeout time.Duration
	// Slots, when set, hands out the run slots instead of Slots of the executor's own, and its
	// Limits apply instead of MaxConcurrent, ProjectMaxConcurrent, QueueTimeout,
	// DefaultTimeout and MaxTimeout. Executors sharing one Slots share its bounds.
	Slots *Slots
	// MaxConsoleBytes bounds captured console output; the last bytes are kept. Default: 64 KiB.
	MaxConsoleBytes int
	// MaxResultBytes bounds a serialised result; a larger one is an error result. Default: 10 MiB.
	MaxResultBytes int
	// ProgramCacheSize is how many compiled programs stay cached (least recently used go first).
	// Default: 1024.
	ProgramCacheSize int
	// MaxHeapBytes arms the heap watchdog: while bots run, the process's live Go heap (as of the
	// last garbage collection) is checked every few milliseconds, and when it exceeds
	// MaxHeapBytes every running bot is interrupted with a "memory limit exceeded" error result.
	// The heap is the whole process's, so the runs cannot be told apart: all of them stop.
	// Default (0): 90% of the Go memory limit (GOMEMLIMIT, which Caddy derives from the
	// cgroup or system memory) when one is set, else off. Negative: off.
	MaxHeapBytes int64
}

// Runner runs bots: one fresh JavaScript runtime per run, compiled programs cached, concurrency
// bounded globally and per bot. It is safe for concurrent use.
type Runner struct {
	opts    Options
	slots   *Slots
	cache   *programCache
	workers workerPool
	heap    *heapWatch // nil when the watchdog is off

	compiles atomic.Int64 // programs compiled by Run, for tests
}

// New returns a Runner with o's zero fields set to their defaults.
func New(o Options) *Runner {
	o = o.withDefaults()
	r := &Runner{
		opts:    o,
		slots:   o.Slots,
		cache:   newProgramCache(o.ProgramCacheSize),
		workers: workerPool{jobs: make(chan func())},
	}
	if o.MaxHeapBytes > 0 {
		r.heap = newHeapWatch(uint64(o.MaxHeapBytes),
			fmt.Sprintf("bot execution stopped: memory limit exceeded (the heap grew past %d MiB)", o.MaxHeapBytes>>20))
	}
	return r
}

// withDefaults returns o with its zero fields set to their defaults and its Slots made.
func (o Options) withDefaults() Options {
	if o.Slots == nil {
		o.Slots = NewSlots(o.Limits())
	}
	lim := o.Slots.Limits()
	o.MaxConcurrent, o.ProjectMaxConcurrent, o.QueueTimeout = lim.MaxConcurrent, lim.ProjectMaxConcurrent, lim.QueueTimeout
	o.DefaultTimeout, o.MaxTimeout = lim.DefaultTimeout, lim.MaxTimeout
	if o.MaxConsoleBytes <= 0 {
		o.MaxConsoleBytes = DefaultMaxConsoleBytes
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = DefaultMaxResultBytes
	}
	if o.ProgramCacheSize <= 0 {
		o.ProgramCacheSize = DefaultProgramCacheSize
	}
	if o.MaxHeapBytes == 0 {
		o.MaxHeapBytes = defaultMaxHeap()
	}
	return o
}

// Limits returns the run limits o sets.
func (o Options) Limits() Limits {
	return Limits{
		MaxConcurrent:        o.MaxConcurrent,
		ProjectMaxConcurrent: o.ProjectMaxConcurrent,
		QueueTimeout:         o.QueueTimeout,
		DefaultTimeout:       o.DefaultTimeout,
		MaxTimeout:           o.MaxTimeout,
	}
}

// Request is one bot run.
type Request struct {
	// CacheKey identifies the code, such as bot id + "@" + versionId of the executable code.
	// Programs are cached by it; the same key with different Code recompiles.
	CacheKey string
	// Code is the compiled CommonJS (Program.JS). It is compiled for the engine on a cache miss.
	Code string
	// Program, when set, is used instead of Code (no cache lookup).
	Program *Program
	// Filename names the code in stack traces. Default: "index.js".
	Filename string
	// Timeout is the run's wall-clock limit, at most Limits.MaxTimeout. Default:
	// Limits.DefaultTimeout.
	Timeout time.Duration
	// MaxConcurrent bounds simultaneous runs of BotID (0 = only the global bound). The first
	// run of a bot sets its bound until all its runs end.
	MaxConcurrent int
	// BotID keys the per-bot bound.
	BotID string
	// Project is the project the run counts against: it takes one of the project's
	// Limits.ProjectMaxConcurrent slots, and queued runs take turns project by project. Empty:
	// the run is bound by MaxConcurrent only.
	Project string
	// User is whom the run is for, within Project: queued runs of a project take turns user by
	// user.
	User string
	// InheritSlot marks a bot-to-bot call: a run made by the bot whose run's context is ctx
	// (the context Run passes to the MedplumClient), which waits for it. The call runs on that
	// run's slot instead of queueing for one, so it never waits behind its own caller, and it
	// skips the per-bot bound of a bot its callers are running. Without such a caller in ctx
	// (or while that caller's slot is lent to another call) the run queues as any other.
	InheritSlot bool
	// Event is the bot's second argument.
	Event Event
	// Medplum serves the bot's first argument. Nil: every call rejects with an
	// OperationOutcomeError saying no FHIR backend is configured.
	Medplum MedplumClient
}

// Outcome is how a run ended.
type Outcome int

// Run outcomes.
const (
	OutcomeSuccess Outcome = iota // the handler returned or resolved; Body holds the result
	OutcomeError                  // it threw, rejected, never settled, or returned something unserialisable
	OutcomeTimeout                // it was stopped at its deadline
)

func (o Outcome) String() string {
	switch o {
	case OutcomeSuccess:
		return "success"
	case OutcomeError:
		return "error"
	case OutcomeTimeout:
		return "timeout"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is a finished run. For OutcomeSuccess, Body and ContentType are the HTTP answer (status
// 200). For OutcomeError and OutcomeTimeout, Message says what went wrong and Body is an
// OperationOutcome carrying that message (fhirgate answers those with status 400, as Medplum does;
// never 5xx, so clients do not retry a bot that has side effects).
type Result struct {
	Outcome     Outcome
	Body        []byte
	ContentType string // full header value, including "; charset=utf-8"
	Message     string
	Console     string // the tail of console output, at most MaxConsoleBytes
	// ConsoleTruncated says earlier console output was dropped to respect MaxConsoleBytes.
	ConsoleTruncated bool
	Duration         time.Duration // from start to end of the run, not counting QueueWait
	QueueWait        time.Duration // time spent waiting for a slot

	// abandoned says the run was answered while its goroutine was still stuck in a native
	// call: a bot worker that sees it has a runaway goroutine and must be replaced.
	abandoned bool
}

// Run runs one bot. The error is for the runner, not the bot: ErrBusy when no slot freed up in
// QueueTimeout, or the context's error when ctx ended while waiting or running. A bot that fails
// in any way is an ordinary Result. When ctx is cancelled during the run, Run returns the
// interrupted run's Result together with the error, so the caller can still audit it; when ctx's
// deadline passes during the run, the Result is an OutcomeTimeout and the error is nil.
func (r *Runner) Run(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	h, err := r.slots.acquire(ctx, &req)
	if err != nil {
		return nil, err
	}
	release, ctx := h.release, h.ctx
	queueWait := time.Since(start)

	prg, cerr := r.program(&req)
	if cerr != nil {
		release()
		return finish(&Result{Outcome: OutcomeError, Message: cerr.Error(), QueueWait: queueWait}), nil
	}
	timeout := h.lim.runTimeout(req.Timeout)

	x := newExecution(r, ctx, &req, prg, timeout)
	if r.heap != nil {
		r.heap.add(x)
		defer r.heap.remove(x)
	}
	timer := time.AfterFunc(timeout, func() { x.stop(stopTimeout) })
	defer timer.Stop()
	stopWatching := context.AfterFunc(ctx, func() { x.stopFor(ctx) })
	defer stopWatching()

	done := make(chan *Result, 1)
	r.workers.submit(func() {
		defer release()
		done <- x.run()
	})
	var res *Result
	select {
	case res = <-done:
	case <-x.stuck:
		res = x.abandoned()
		res.abandoned = true
	}
	res.QueueWait = queueWait
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
		return res, fmt.Errorf("bot run cancelled: %w", ctx.Err())
	}
	return res, nil
}

// program returns the compiled program of req, from the cache when it can.
func (r *Runner) program(req *Request) (*programEntry, error) {
	filename := req.Filename
	if filename == "" {
		filename = "index.js"
	}
	if req.Program != nil && req.Program.prg != nil {
		return &programEntry{prg: req.Program.prg, filename: filename}, nil
	}
	code := req.Code
	if req.Program != nil {
		code = req.Program.JS
	}
	if e := r.cache.get(req.CacheKey, code); e != nil {
		return e, nil
	}
	r.compiles.Add(1)
	prg, err := compileGoja(filename, code)
	if err != nil {
		return nil, fmt.Errorf("loading bot code: %w", err)
	}
	e := &programEntry{code: code, prg: prg, filename: filename}
	r.cache.put(req.CacheKey, e)
	return e, nil
}

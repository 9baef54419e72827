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
// once, but not a long native call (a huge JSON.stringify, a large sort's comparisons in Go);
// after the grace period Run answers anyway and gives the run's slot back, so a bot stuck in
// native code cannot hold slots, and with them every project's runs, past its deadline. The
// goroutine goes on until the native call returns; the runner counts these abandoned goroutines
// and, while MaxConcurrent of them are still going, refuses new runs with ErrBusy (see Run), so
// at most 2 × MaxConcurrent goroutines run bot code at any time. Regular expressions stop within
// regexpMatchTimeout, so they are never stuck for long.
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
	// Compiler, for a Runner, checks code in a compile process (Compiler.Check) before the
	// Runner compiles it in this process for the first time, so code that would crash the
	// compiler or hold it past the compile timeout never reaches the process's own stack. Code
	// a Compiler compiled ($deploy) passes without a process; other code (stored before compiles
	// ran in processes) costs one check, remembered for the life of this process (across
	// reloads). Checked code still costs this
	// process its compile time once per cache miss: at most about what it took in the compile
	// process, which the compile timeout bounds. Nil: no check. A Pool ignores it: its workers
	// compile, within each run's deadline, and a crash there ends only that worker.
	Compiler *Compiler
	// HeapBudget is how much running bots together may add to the process's live heap, so that
	// bots in the gateway's process have a budget of their own far below the gateway's limit.
	// The watchdog's limit is then the live heap of the process while no bot runs (sampled when
	// a run starts on an idle runner, from a collection that ran after the last run ended) plus
	// HeapBudget, or MaxHeapBytes when that is lower. goja does not account memory per runtime,
	// so this is a shared budget: when the running bots together pass it, all of them stop.
	// A single native allocation (a huge string or typed array made in one call) is not
	// interrupted; it is seen once it returns, and one larger than the machine's memory is Go's
	// fatal out-of-memory error, which ends the process. Default: DefaultHeapBudget. Negative: no
	// budget (only MaxHeapBytes).
	HeapBudget int64
	// MaxInstances bounds the idle warm instances (awslambda runs) kept across all bots; past
	// it the least recently used goes. Default: DefaultMaxInstances.
	MaxInstances int
	// MaxInstancesPerVersion bounds the idle warm instances kept per bot version. Runs that
	// overlap each take an instance of their own; those past the bound are discarded when
	// their run ends. Default: DefaultMaxInstancesPerVersion.
	MaxInstancesPerVersion int
	// InstanceIdleTimeout is how long a warm instance stays unused before it is discarded.
	// Default: DefaultInstanceIdleTimeout.
	InstanceIdleTimeout time.Duration
}

// DefaultHeapBudget is the default HeapBudget, the same as a worker's default memory.
const DefaultHeapBudget = 256 << 20

// Runner runs bots: in a warm instance of the bot version (awslambda) or a fresh JavaScript
// runtime (vmcontext), compiled programs cached, concurrency bounded globally and per bot. It is
// safe for concurrent use.
type Runner struct {
	opts      Options
	slots     *Slots
	cache     *programCache
	instances *instancePool
	workers   workerPool
	heap      *heapWatch // nil when the watchdog is off

	compiles atomic.Int64 // programs compiled by Run, for tests
	loads    atomic.Int64 // modules whose top level ran, for tests
	stuck    atomic.Int64 // runs answered after abandonGrace whose goroutine still runs
}

// New returns a Runner with o's zero fields set to their defaults.
func New(o Options) *Runner {
	o = o.withDefaults()
	r := &Runner{
		opts:      o,
		slots:     o.Slots,
		cache:     newProgramCache(o.ProgramCacheSize),
		instances: newInstancePool(o),
		workers:   workerPool{jobs: make(chan func())},
	}
	switch {
	case o.HeapBudget > 0:
		r.heap = newHeapWatch(uint64(max(o.MaxHeapBytes, 0)), uint64(o.HeapBudget),
			fmt.Sprintf("bot execution stopped: memory limit exceeded (running bots grew the heap by more than %d MiB)", o.HeapBudget>>20))
		// Warm instances' module state is the bots' memory: it counts against the budget, and
		// a breach discards the idle instances with the stopped runs'.
		r.heap.warm = r.instances.held
	case o.MaxHeapBytes > 0:
		r.heap = newHeapWatch(uint64(o.MaxHeapBytes), 0,
			fmt.Sprintf("bot execution stopped: memory limit exceeded (the heap grew past %d MiB)", o.MaxHeapBytes>>20))
	}
	if r.heap != nil {
		r.heap.tripped = r.instances.dropAll
	}
	return r
}

// HeapBudget is the heap budget of the runner's bots (Options.HeapBudget after defaults).
func (r *Runner) HeapBudget() int64 { return r.opts.HeapBudget }

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
	if o.HeapBudget == 0 {
		o.HeapBudget = DefaultHeapBudget
	}
	if o.MaxInstances <= 0 {
		o.MaxInstances = DefaultMaxInstances
	}
	if o.MaxInstancesPerVersion <= 0 {
		o.MaxInstancesPerVersion = DefaultMaxInstancesPerVersion
	}
	if o.InstanceIdleTimeout <= 0 {
		o.InstanceIdleTimeout = DefaultInstanceIdleTimeout
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
	// Runtime is RuntimeAWSLambda or RuntimeVMContext (Bot.runtimeVersion); empty means
	// DefaultRuntime, anything else is an error result. An awslambda run of a request with a
	// CacheKey uses a warm instance of its bot version (Project, BotID and CacheKey): the
	// module's top level ran once in it, and the run calls its handler with a fresh event,
	// medplum client and console capture. Module state (top-level variables, globals) may
	// therefore carry from one run of a bot version to the next, never to another bot, version
	// or project. An instance runs one run at a time (overlapping runs take instances of their
	// own) and is discarded after a run that timed out, was stopped (memory, cancellation) or
	// failed uncatchably. Without a CacheKey every run gets a fresh runtime.
	Runtime string
	// instanceKey and instanceBot, when set, name the warm instances instead of CacheKey,
	// BotID and Project (a worker's runs, which carry neither).
	instanceKey, instanceBot string
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
	// Fetch serves the sandbox's fetch (fetch.go). Nil: every fetch rejects, saying the bot has
	// no egress.
	Fetch Fetcher
	// FHIRBaseURL is the gateway's public FHIR base the run was asked through, absolute, such as
	// "https://gw.example.com/fhir/R4/": medplum.fhirUrl, fhirSearchUrl and getBaseUrl build on it.
	// Empty: they throw, saying the run does not know it.
	FHIRBaseURL string
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
// QueueTimeout, an *InputError when the event's input was left to parse (PrepareInput) and
// does not parse, or the context's error when ctx ended while waiting or running. A bot that fails
// in any way is an ordinary Result. When ctx is cancelled during the run, Run returns the
// interrupted run's Result together with the error, so the caller can still audit it; when ctx's
// deadline passes during the run, the Result is an OutcomeTimeout and the error is nil.
func (r *Runner) Run(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	if n := r.stuck.Load(); n >= int64(r.opts.MaxConcurrent) {
		return nil, fmt.Errorf("%w (%d runs are stuck in native code past their deadline)", ErrBusy, n)
	}
	h, err := r.slots.acquire(ctx, &req)
	if err != nil {
		return nil, err
	}
	release, ctx := h.release, h.ctx
	queueWait := time.Since(start)
	if err := req.Event.Input.parseDeferred(); err != nil {
		release()
		return nil, err
	}

	runtime := req.Runtime
	if runtime == "" {
		runtime = DefaultRuntime
	}
	if runtime != RuntimeAWSLambda && runtime != RuntimeVMContext {
		release()
		return finish(&Result{Outcome: OutcomeError, Message: unsupportedRuntime(runtime), QueueWait: queueWait}), nil
	}

	prg, cerr := r.program(ctx, &req)
	if cerr != nil {
		release()
		switch {
		case errors.Is(cerr, ErrCompileBusy):
			return nil, ErrBusy
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		return finish(&Result{Outcome: OutcomeError, Message: cerr.Error(), QueueWait: queueWait}), nil
	}
	timeout := h.lim.runTimeout(req.Timeout)

	var key, bot string
	if runtime == RuntimeAWSLambda {
		key, bot = instanceKeys(&req)
	}
	var x *execution
	if key != "" {
		x = r.instances.get(key, bot, prg.code)
	}
	if x == nil {
		x = newExecution(r, prg)
	}
	id, stuck := x.begin(ctx, &req, timeout)
	if r.heap != nil {
		r.heap.add(x) // removed when the goroutine ends: an abandoned run still allocates
	}
	timer := time.AfterFunc(timeout, func() { x.stopRun(id, stopTimeout) })
	defer timer.Stop()
	stopWatching := context.AfterFunc(ctx, func() { x.stopRunFor(id, ctx) })
	defer stopWatching()

	// state says who gives the slot back: the goroutine when the run ends (running → ended), or
	// Run when it abandons the run (running → abandoned), and then the goroutine only uncounts
	// itself when it finally ends. A warm instance goes back to its pool before the slot does,
	// so the run the slot goes to finds it.
	const (
		running int32 = iota
		ended
		abandoned
	)
	var state atomic.Int32
	done := make(chan *Result, 1)
	r.workers.submit(func() {
		res := x.run() // recovers the engine's panics into an error result
		if r.heap != nil {
			r.heap.remove(x)
		}
		finished := state.CompareAndSwap(running, ended)
		r.instances.back(x)
		// The instance goes back to its pool and the slot to the queue before Run answers: the
		// caller's next run finds both (a bot calling bots through executeBot makes its next
		// call at once, on the same lent slot).
		// A run whose context ended is discarded even when it finished without being stopped:
		// the caller's cancel also ends the bot's pending medplum calls, so the bot may see a
		// rejected call and return before the interrupt reaches it (context.AfterFunc runs on
		// its own goroutine), and the instance of an interrupted run must not be reused.
		if !finished || !x.seal(id) || key == "" || ctx.Err() != nil || !r.instances.put(key, bot, prg.code, x) {
			x.drop()
		}
		if finished {
			release()
		} else {
			r.stuck.Add(-1)
		}
		done <- res
	})
	var res *Result
	select {
	case res = <-done:
	case <-stuck:
		if state.CompareAndSwap(running, abandoned) {
			r.stuck.Add(1)
			release()
			res = x.abandoned()
			res.abandoned = true
		} else {
			res = <-done // it ended just now
		}
	}
	res.QueueWait = queueWait
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
		return res, fmt.Errorf("bot run cancelled: %w", ctx.Err())
	}
	return res, nil
}

// unsupportedRuntime is the message of a run whose runtime is neither awslambda nor vmcontext
// (a bot stored with another value, or a Request made with one).
func unsupportedRuntime(runtime string) string {
	return fmt.Sprintf("unsupported bot runtime '%s' (the runtimes are %s and %s)", truncate(runtime, 40), RuntimeAWSLambda, RuntimeVMContext)
}

// program returns the compiled program of req, from the cache when it can.
func (r *Runner) program(ctx context.Context, req *Request) (*programEntry, error) {
	filename := req.Filename
	if filename == "" {
		filename = "index.js"
	}
	if req.Program != nil && req.Program.prg != nil {
		return &programEntry{code: req.Program.JS, prg: req.Program.prg, filename: filename, noRegExp: req.Program.regexpFree, locale: req.Program.locale}, nil
	}
	code := req.Code
	if req.Program != nil {
		code = req.Program.JS
	}
	if e := r.cache.get(req.CacheKey, code); e != nil {
		return e, nil
	}
	if r.opts.Compiler != nil {
		if err := r.opts.Compiler.Check(ctx, filename, code); err != nil {
			return nil, fmt.Errorf("loading bot code: %w", err)
		}
	}
	r.compiles.Add(1)
	prg, regexps, err := compileGoja(filename, code)
	if err != nil {
		return nil, fmt.Errorf("loading bot code: %w", err)
	}
	e := &programEntry{code: code, prg: prg, filename: filename, noRegExp: !regexps, locale: mayUseLocale(code)}
	r.cache.put(req.CacheKey, e)
	return e, nil
}

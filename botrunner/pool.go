package botrunner

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Executor runs bots. *Runner runs them in this process; *Pool runs them in worker processes.
// Both answer the same Requests with the same Results.
type Executor interface {
	Run(ctx context.Context, req Request) (*Result, error)
}

// Defaults for the zero values of PoolOptions.
const (
	DefaultWorkerMemory      = 256 << 20
	DefaultWorkerIdleTimeout = time.Minute
	DefaultRunsPerWorker     = 4
	// MinWorkerMemory is the smallest memory cap a worker accepts: the Go runtime, the engine
	// and a compiled bot take some 10 MiB before the bot allocates anything.
	MinWorkerMemory = 64 << 20
)

// killGrace is how long past a run's deadline the pool waits for the worker's answer before it
// kills the worker. The worker answers a bot stuck in a native call abandonGrace after
// interrupting it, so the pool's own kill is the backstop for a worker that cannot answer.
const killGrace = abandonGrace + time.Second

// rssCheckInterval is how often the pool reads busy workers' resident memory. A bot allocating
// at a gigabyte a second gets a few tens of megabytes past its cap before it is killed.
const rssCheckInterval = 20 * time.Millisecond

// spawnTimeout bounds a worker's start, up to its hello frame.
const spawnTimeout = 15 * time.Second

// PoolOptions configures a Pool. The zero value of each field but Command means its default.
type PoolOptions struct {
	// Options are the run limits, as for a Runner. MaxConcurrent also bounds the number of
	// worker processes, since each runs at least one bot. ProgramCacheSize bounds the pool's
	// table of code digests; each worker caches compiled programs within its memory.
	// MaxHeapBytes does not apply: WorkerMemory does.
	Options

	// Command starts a worker: the executable and its arguments, which must end up in
	// ServeWorker (fhirgate's is the Caddy binary with "fhirgate bot-worker"). Required.
	Command []string

	// WorkerMemory caps each worker process's memory in bytes: its own resident memory, not
	// counting the binary's pages, which are shared. The worker's Go runtime and its heap
	// watchdog keep a bot below it and stop the bot with an error result when it is reached; a
	// worker whose memory passes it anyway (one huge native allocation) is killed. Default:
	// 256 MiB; at least MinWorkerMemory.
	WorkerMemory int64

	// RunsPerWorker is how many runs of one bot a worker may take at once. Runs of different
	// bots never share a worker, so whatever a bot does to its worker (exhaust its memory, get
	// stuck in a native call) ends only runs of that same bot; runs never share a JavaScript
	// runtime (an awslambda instance serves one run at a time). Runs spread over as many workers as there are CPUs before
	// they share one. 1 gives every run a process of its own: the most isolation, at ~28 MiB of
	// memory per concurrent run instead of per worker. Default: 4.
	RunsPerWorker int

	// KeepWorkers is how many idle workers are kept however long they stay idle. Default:
	// GOMAXPROCS (at most MaxConcurrent).
	KeepWorkers int

	// IdleTimeout is how long a worker beyond KeepWorkers may stay idle before it is stopped.
	// Default: 1m.
	IdleTimeout time.Duration

	// Logger receives the workers' stderr and their lifecycle events. Default: no logging.
	Logger *zap.Logger
}

// Pool runs bots in worker processes, each serving one bot at a time (up to RunsPerWorker runs
// of it), so a bot that allocates without bound, loops in a native call or crashes the engine
// takes down only its own worker: the worker is killed and replaced, and its runs answer an
// error Result. Other bots' runs never share that worker. Workers start when
// runs need them and are reused; see the package documentation ("Isolation") for what the
// processes are and are not isolated from. A Pool is safe for concurrent use.
type Pool struct {
	o      PoolOptions
	slots  *Slots
	codes  *digestCache
	logger *zap.Logger

	mu         sync.Mutex
	idle       []*worker // most recently used last
	busy       map[*worker]struct{}
	starting   []*starting // workers being started
	cpus       int         // workers that runs spread over before they share (GOMAXPROCS)
	closed     bool
	monitoring bool // the resident-memory monitor runs
	reaping    bool // a reap is scheduled

	nextID         atomic.Uint64
	spawns         atomic.Int64 // workers started, for tests
	codeSends      atomic.Int64 // runs whose code was sent to a worker, for tests
	alwaysSendCode bool         // send code with every run, for benchmarks
}

// NewPool returns a Pool with o's zero fields set to their defaults. It starts no process.
func NewPool(o PoolOptions) (*Pool, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("bot worker command is required")
	}
	if IsWorkerProcess() {
		// A binary that does not know the worker command may have run something that loads a
		// pool; refusing here stops a chain of processes each starting the next.
		return nil, errors.New("bot workers cannot start bot workers")
	}
	o.MaxHeapBytes = -1 // the workers' memory is WorkerMemory
	o.HeapBudget = -1
	o.Options = o.Options.withDefaults()
	if o.WorkerMemory == 0 {
		o.WorkerMemory = DefaultWorkerMemory
	}
	if o.WorkerMemory < MinWorkerMemory {
		return nil, fmt.Errorf("bot worker memory of %d bytes is below the minimum of %d MiB", o.WorkerMemory, MinWorkerMemory>>20)
	}
	if o.RunsPerWorker < 0 {
		return nil, fmt.Errorf("bot runs per worker must be positive, not %d", o.RunsPerWorker)
	}
	if o.RunsPerWorker == 0 {
		o.RunsPerWorker = DefaultRunsPerWorker
	}
	cpus := runtime.GOMAXPROCS(0)
	if o.KeepWorkers <= 0 {
		o.KeepWorkers = cpus
	}
	o.KeepWorkers = min(o.KeepWorkers, o.MaxConcurrent)
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultWorkerIdleTimeout
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return &Pool{
		o:      o,
		slots:  o.Slots,
		codes:  newDigestCache(o.ProgramCacheSize),
		logger: o.Logger,
		busy:   map[*worker]struct{}{},
		cpus:   cpus,
	}, nil
}

// Run runs one bot in a worker process, with Runner.Run's semantics: ErrBusy when no slot
// freed up in QueueTimeout, the context's error when ctx ended while waiting, a Result and a
// cancellation error when ctx was cancelled during the run. A worker that has to be killed
// (memory, deadline) or that crashes gives an OutcomeError Result saying so.
func (p *Pool) Run(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	h, err := p.slots.acquire(ctx, &req)
	if err != nil {
		return nil, err
	}
	defer h.release()
	ctx = h.ctx
	req.Timeout = h.lim.runTimeout(req.Timeout)
	w, err := p.get(ctx, req.BotID)
	queueWait := time.Since(start)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.logger.Error("starting a bot worker", zap.Error(err))
		return finish(&Result{Outcome: OutcomeError, Message: "bot worker could not be started; see the gateway's log", QueueWait: queueWait}), nil
	}
	res, ierr := w.run(ctx, &req)
	p.put(w)
	if ierr != nil {
		return nil, ierr
	}
	if res == nil {
		return nil, ctx.Err()
	}
	res.QueueWait = queueWait
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
		return res, fmt.Errorf("bot run cancelled: %w", ctx.Err())
	}
	return res, nil
}

// Close stops idle workers and has busy ones stop when their run ends. Runs may still come
// (an asynchronous job of the old config, say): each gets a worker that stops after it.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, w := range idle {
		w.stop()
	}
	return nil
}

// get takes a worker for a run of bot. Until there are as many busy (or starting) workers as
// CPUs, it takes an idle worker or starts one, so runs spread over the CPUs; after that a run
// joins the least loaded worker of its bot with room (a starting one too, so a burst of runs
// does not start a process each), else takes an idle worker, else starts one. Workers beyond
// those the load keeps busy go idle and are reaped. The slot the caller holds keeps the number
// of busy workers within MaxConcurrent, plus one for each bot-to-bot call running on its
// caller's slot (InheritSlot; the caller's worker waits for it). Runs without a bot id never
// share a worker.
func (p *Pool) get(ctx context.Context, bot string) (*worker, error) {
	for {
		p.mu.Lock()
		spread := len(p.busy)+len(p.starting) < p.cpus
		if !spread {
			if w, st := p.sharable(bot); w != nil {
				w.runs++
				p.mu.Unlock()
				return w, nil
			} else if st != nil {
				st.runs++
				p.mu.Unlock()
				w, err := p.join(ctx, st)
				if err != nil && ctx.Err() == nil {
					continue // its start failed: try again, as if it had never begun
				}
				return w, err
			}
		}
		if w := p.takeIdle(bot); w != nil {
			p.mu.Unlock()
			return w, nil
		}
		st := &starting{bot: bot, runs: 1, done: make(chan struct{})}
		p.starting = append(p.starting, st)
		p.mu.Unlock()
		return p.start(ctx, st)
	}
}

// starting is a worker being started for a run of bot; other runs of bot may join it.
type starting struct {
	bot  string
	runs int // runs waiting for it; guarded by p.mu
	done chan struct{}
	w    *worker // set, or err, when done is closed
	err  error
}

// start starts the worker st stands for, hands it to the runs that joined, and returns it.
func (p *Pool) start(ctx context.Context, st *starting) (*worker, error) {
	w, err := p.spawn(ctx)
	p.mu.Lock()
	p.starting = slices.DeleteFunc(p.starting, func(s *starting) bool { return s == st })
	if err == nil {
		p.markBusy(w, st.bot, st.runs)
	}
	st.w, st.err = w, err
	close(st.done)
	p.mu.Unlock()
	return w, err
}

// join waits for a starting worker the caller counted itself in. A caller that stops waiting
// gives its place back once the worker is up.
func (p *Pool) join(ctx context.Context, st *starting) (*worker, error) {
	select {
	case <-st.done:
		return st.w, st.err
	case <-ctx.Done():
		go func() {
			<-st.done
			if st.w != nil {
				p.put(st.w)
			}
		}()
		return nil, ctx.Err()
	}
}

// takeIdle takes the most recently used live idle worker for a run of bot, or returns nil.
// p.mu is held.
func (p *Pool) takeIdle(bot string) *worker {
	for len(p.idle) > 0 {
		w := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if w.alive() {
			p.markBusy(w, bot, 1)
			return w
		}
	}
	return nil
}

// sharable is the least loaded worker of bot with room for one more run: a live busy one, or
// else one being started. Both are nil when there is none. p.mu is held.
func (p *Pool) sharable(bot string) (*worker, *starting) {
	if bot == "" || p.o.RunsPerWorker < 2 {
		return nil, nil
	}
	var best *worker
	for w := range p.busy {
		if w.bot == bot && w.runs < p.o.RunsPerWorker && (best == nil || w.runs < best.runs) && w.alive() {
			best = w
		}
	}
	if best != nil {
		return best, nil
	}
	var st *starting
	for _, s := range p.starting {
		if s.bot == bot && s.runs < p.o.RunsPerWorker && (st == nil || s.runs < st.runs) {
			st = s
		}
	}
	return nil, st
}

// markBusy records w as taken by runs runs of bot and starts the memory monitor. p.mu is held.
func (p *Pool) markBusy(w *worker, bot string, runs int) {
	w.bot, w.runs = bot, runs
	p.busy[w] = struct{}{}
	if !p.monitoring {
		p.monitoring = true
		go p.monitor()
	}
}

// put gives a worker back after a run: still busy while it has other runs, then idle again if
// it is healthy, stopped otherwise.
func (p *Pool) put(w *worker) {
	p.mu.Lock()
	if w.runs--; w.runs > 0 {
		p.mu.Unlock()
		return
	}
	w.bot = ""
	delete(p.busy, w)
	if p.closed || !w.alive() {
		p.mu.Unlock()
		w.stop()
		return
	}
	w.idleSince = time.Now()
	p.idle = append(p.idle, w)
	if len(p.idle) > p.o.KeepWorkers && !p.reaping {
		p.reaping = true
		time.AfterFunc(p.o.IdleTimeout, p.reap)
	}
	p.mu.Unlock()
}

// reap stops workers idle for IdleTimeout beyond the KeepWorkers most recently used.
func (p *Pool) reap() {
	p.mu.Lock()
	var stale []*worker
	cutoff := time.Now().Add(-p.o.IdleTimeout)
	for len(p.idle) > p.o.KeepWorkers && !p.idle[0].idleSince.After(cutoff) {
		stale = append(stale, p.idle[0])
		p.idle = p.idle[1:]
	}
	p.reaping = len(p.idle) > p.o.KeepWorkers && !p.closed
	if p.reaping {
		time.AfterFunc(time.Until(p.idle[0].idleSince.Add(p.o.IdleTimeout)), p.reap)
	}
	p.mu.Unlock()
	for _, w := range stale {
		w.stop()
	}
}

// monitor kills busy workers whose own resident memory (residentBytes) passes WorkerMemory. It runs while any
// worker is busy; idle workers shrink their heap after a run (see workerServer.shrink).
func (p *Pool) monitor() {
	defer func() {
		if r := recover(); r != nil {
			p.logger.Error("bot worker memory monitor panicked", zap.Any("panic", r))
			p.mu.Lock()
			p.monitoring = false
			p.mu.Unlock()
		}
	}()
	tick := time.NewTicker(rssCheckInterval)
	defer tick.Stop()
	status := newStatusReader()
	defer status.close()
	var busy []*worker
	for range tick.C {
		p.mu.Lock()
		if len(p.busy) == 0 {
			p.monitoring = false
			p.mu.Unlock()
			return
		}
		busy = busy[:0]
		for w := range p.busy {
			busy = append(busy, w)
		}
		p.mu.Unlock()
		for _, w := range busy {
			rss, err := status.residentBytes(w.pid)
			if err != nil {
				continue // gone (its reader notices) or no /proc: the worker's own limits apply
			}
			if rss > p.o.WorkerMemory {
				w.kill(fmt.Sprintf("memory limit exceeded (%d MiB in use, the cap is %d MiB)", rss>>20, p.o.WorkerMemory>>20))
			}
		}
		status.sweep()
	}
}

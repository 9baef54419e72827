package botrunner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Inside a worker, its memory cap is split so that the parent's hard limit (the cap, on the
// process's resident memory) is the last line, not the usual one: the Go runtime is told to keep
// its memory under 3/4 of the cap (collecting harder as it nears it), and the heap watchdog stops
// the bot when the live heap passes 5/8 of it. The rest is for the binary's pages, goroutine
// stacks and what a collection cycle allocates before it finishes.
const (
	workerGoLimitNum, workerGoLimitDen = 3, 4
	workerHeapNum, workerHeapDen       = 5, 8
)

// workerMaxStack bounds one goroutine's stack in a worker. Bot recursion stops far earlier
// (maxCallStack); a native call that recurses without bound (JSON.stringify of a deeply nested
// value) then crashes the worker quickly instead of growing a stack to Go's default 1 GB.
const workerMaxStack = 64 << 20

// workerGCPercent is a worker's GOGC. A Caddy build's packages leave some 4 MiB of live heap
// behind at start, which every collection marks; at the default 100 a worker running trivial bots
// collects every hundred runs or so, and marking that heap costs more than the bots themselves
// (measured: 25 of ~120 µs of CPU per run). 400 collects a fifth as often for some 16 MiB more
// heap per worker; GOMEMLIMIT still bounds the worker as the heap grows.
const workerGCPercent = 400

// workerEnv marks a worker process (see NewPool): a worker never starts workers of its own.
// Its value is the process's role: "1" for a bot worker, compileRole for a compile process
// (see Compiler).
const workerEnv = "FHIRGATE_BOT_WORKER"

// IsWorkerProcess tells whether this process was started by a Pool or a Compiler, which mark
// the environment of the processes they start: such a process must call ServeWorker.
func IsWorkerProcess() bool { return os.Getenv(workerEnv) != "" }

// ServeWorker is the whole life of a bot worker process: it serves a Pool over the process's
// stdin and stdout until stdin closes, which is how the pool stops it. Anything else written
// to stdout goes to stderr, which the pool logs. SIGINT, SIGTERM and SIGHUP are ignored: the
// pool decides when a worker ends, and a worker must finish its run while the gateway shuts
// down gracefully. Started by a Compiler, the same command compiles one bot's source instead.
func ServeWorker() error {
	in, out, err := workerPipes()
	if err != nil {
		return fmt.Errorf("preparing the worker's pipes: %w", err)
	}
	ignoreStopSignals()
	if os.Getenv(workerEnv) == compileRole {
		return serveCompile(in, out)
	}
	return serveWorker(in, out)
}

// workerServer is the worker's side of the protocol.
type workerServer struct {
	out      frameWriter
	runner   *Runner
	programs *programCache // by digest, bounded in bytes of code
	memory   int64
	maxFrame int

	mu      sync.Mutex
	runs    map[uint64]*workerRun
	monitor monitorKeeper
	serves  workerPool // the goroutines runs are served on
}

// workerRun is one run in the worker.
type workerRun struct {
	id     uint64
	ctx    context.Context
	cancel context.CancelFunc
	code   chan string           // the answer to a need frame
	fetch  rpcFetcher            // the run's fetch calls
	calls  callTable[*answerMsg] // the run's medplum calls
}

func serveWorker(in io.Reader, out io.Writer) error {
	fr := newFrameReader(in, maxParentFrame)
	typ, payload, err := fr.next()
	if err != nil {
		return fmt.Errorf("reading the init frame: %w", err)
	}
	var init initMsg
	if typ != frameInit {
		return fmt.Errorf("first frame is %q, not init", typ)
	}
	if err := init.decode(&decoder{b: payload}); err != nil {
		return fmt.Errorf("decoding the init frame: %w", err)
	}
	s := &workerServer{out: frameWriter{w: out}, memory: init.memory, maxFrame: init.maxFrame, runs: map[uint64]*workerRun{}, serves: workerPool{jobs: make(chan func())}}
	hello := func(e *encoder) { e.str(protocolVersion); e.uint(uint64(os.Getpid())) }
	if err := s.out.send(frameHello, hello); err != nil {
		return fmt.Errorf("answering init: %w", err)
	}
	if init.version != protocolVersion {
		return fmt.Errorf("the gateway speaks %q, this worker %q", init.version, protocolVersion)
	}
	s.configure(&init)

	for {
		typ, payload, err := fr.next()
		if errors.Is(err, io.EOF) {
			return nil // the pool closed stdin: time to go
		}
		if err != nil {
			return fmt.Errorf("reading a frame: %w", err)
		}
		if err := s.handle(typ, payload); err != nil {
			return err
		}
	}
}

// configure applies the init frame's limits to the runtime and builds the runner.
func (s *workerServer) configure(init *initMsg) {
	// Nothing reads a worker's heap profile; its sampling unwinds a stack every 512 KiB allocated
	// (some 1% of a worker's CPU running trivial bots).
	runtime.MemProfileRate = 0
	debug.SetMaxStack(workerMaxStack)
	debug.SetGCPercent(workerGCPercent)
	heap := int64(-1)
	if init.memory > 0 {
		debug.SetMemoryLimit(init.memory / workerGoLimitDen * workerGoLimitNum)
		heap = init.memory / workerHeapDen * workerHeapNum
	}
	s.runner = New(Options{
		// The pool bounds concurrency, waiting and run time; the worker's runner never refuses
		// or shortens a run.
		MaxConcurrent:   64,
		QueueTimeout:    time.Hour,
		MaxTimeout:      -1,
		MaxConsoleBytes: init.maxConsoleBytes,
		MaxResultBytes:  init.maxResultBytes,
		MaxHeapBytes:    heap,
		HeapBudget:      -1, // the worker's whole memory is the bot's: MaxHeapBytes bounds it
	})
	if s.runner.heap != nil {
		s.runner.heap.message = fmt.Sprintf("bot execution stopped: memory limit exceeded (bot worker memory %d MiB)", init.memory>>20)
	}
	// Compiled programs live in the worker's capped memory: bound them by the size of their code
	// (a program takes a few times its source).
	s.programs = newProgramCache(DefaultProgramCacheSize)
	s.programs.maxBytes = max(init.memory/16, 4<<20)
}

func (s *workerServer) handle(typ byte, payload []byte) error {
	d := &decoder{b: payload}
	switch typ {
	case frameRun:
		var m runMsg
		if err := m.decode(d); err != nil {
			return fmt.Errorf("decoding a run frame: %w", err)
		}
		s.start(&m)
	case frameCode:
		id, code := d.uint(), d.str()
		if err := d.done(); err != nil {
			return fmt.Errorf("decoding a code frame: %w", err)
		}
		if r := s.run(id); r != nil {
			select {
			case r.code <- code:
			default:
			}
		}
	case frameCancel:
		id := d.uint()
		if r := s.run(id); r != nil {
			r.cancel()
		}
	case frameAnswer:
		a := new(answerMsg)
		if err := a.decode(d); err != nil {
			return fmt.Errorf("decoding an answer frame: %w", err)
		}
		if r := s.run(a.id); r != nil {
			r.calls.deliver(a.call, a)
		}
	case frameFetched:
		a := new(fetchedMsg)
		if err := a.decode(d); err != nil {
			return fmt.Errorf("decoding a fetched frame: %w", err)
		}
		if r := s.run(a.id); r != nil {
			r.fetch.calls.deliver(a.call, a)
		}
	default:
		return fmt.Errorf("unknown frame type %q", typ)
	}
	return nil
}

func (s *workerServer) run(id uint64) *workerRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[id]
}

// start registers the run before its goroutine starts, so a cancel frame right behind the run
// frame finds it.
func (s *workerServer) start(m *runMsg) {
	// One context: cancelling a deadline's context ends it with context.Canceled, as a child
	// WithCancel would, and a cancel frame needs nothing more.
	var ctx context.Context
	var cancel context.CancelFunc
	if m.deadline > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), m.deadline)
	} else {
		ctx, cancel = context.WithCancel(context.Background())
	}
	r := &workerRun{id: m.id, ctx: ctx, cancel: cancel, code: make(chan string, 1), fetch: rpcFetcher{s: s, id: m.id}}
	s.mu.Lock()
	s.runs[m.id] = r
	s.mu.Unlock()
	// On a reused goroutine, whose stack has grown already (see workerPool).
	s.serves.submit(func() {
		defer cancel()
		s.serve(r, m)
	})
}

// serve runs the bot and sends the result.
func (s *workerServer) serve(r *workerRun, m *runMsg) {
	msg := resultMsg{id: m.id}
	prg, failed := s.program(r, m)
	switch {
	case failed != nil:
		msg.res = *failed
	case prg == nil:
		msg.noResult = true // the run ended while waiting for its code
	default:
		req := Request{
			Program: &Program{prg: prg.prg, regexpFree: prg.noRegExp, locale: prg.locale}, Filename: m.filename, Timeout: m.timeout, Event: m.event,
			Runtime: m.runtime, instanceKey: m.instanceKey, instanceBot: m.instanceBot, FHIRBaseURL: m.fhirBaseURL,
			Fetch: &r.fetch, // the pool answers "no egress" for a run without a Fetcher
		}
		if m.hasMedplum {
			req.Medplum = &rpcMedplum{s: s, r: r}
		}
		s.monitor.runStarting() // before the run sets its timeout timer: see monitorKeeper
		res, err := s.runner.Run(r.ctx, req)
		var ierr *InputError
		switch {
		case errors.As(err, &ierr):
			msg.noResult, msg.inputErr = true, ierr
		case res == nil:
			msg.noResult = true
		default:
			msg.res, msg.abandoned = *res, res.abandoned
		}
	}
	s.mu.Lock()
	delete(s.runs, m.id)
	idle := len(s.runs) == 0
	s.mu.Unlock()
	// A failed write means the pool is gone; the read loop sees it too and ends the process.
	_ = s.out.send(frameResult, msg.encode)
	if idle {
		s.shrink()
	}
}

// program returns the compiled program of m: from the cache, from the frame, or asked for.
// A compile error is returned as the run's result; nil, nil means the run ended first.
func (s *workerServer) program(r *workerRun, m *runMsg) (*programEntry, *Result) {
	if m.digest != "" {
		if e := s.programs.get(m.digest, ""); e != nil {
			return e, nil
		}
	}
	code := m.code
	if !m.hasCode {
		if err := s.out.send(frameNeed, func(e *encoder) { e.uint(m.id) }); err != nil {
			return nil, nil
		}
		select {
		case code = <-r.code:
		case <-r.ctx.Done():
			return nil, nil
		}
	}
	prg, regexps, err := compileGoja(m.filename, code)
	if err != nil {
		return nil, finish(&Result{Outcome: OutcomeError, Message: fmt.Errorf("loading bot code: %w", err).Error()})
	}
	e := &programEntry{prg: prg, filename: m.filename, size: len(code), noRegExp: !regexps, locale: mayUseLocale(code)}
	s.programs.put(m.digest, e)
	return e, nil
}

// shrink returns memory to the system after a run that left a large heap behind, so an idle
// worker does not sit near its cap (the pool would see a fat process) and the next bot starts
// from a small heap.
func (s *workerServer) shrink() {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() == metrics.KindUint64 && s.memory > 0 && sample[0].Value.Uint64() > uint64(s.memory/4) {
		debug.FreeOSMemory()
	}
}

// rpcMedplum is the worker's MedplumClient: it asks the pool, which asks the real one.
type rpcMedplum struct {
	s *workerServer
	r *workerRun
}

// frameOverhead is room for a do frame's fields besides its body.
const frameOverhead = 64 << 10

func (c *rpcMedplum) Do(ctx context.Context, method, path string, query url.Values, body []byte, contentType string, header http.Header) (int, string, []byte, error) {
	if len(body) > c.s.maxFrame-frameOverhead {
		return 0, "", nil, fmt.Errorf("the request body of %d bytes is larger than a bot worker may send (%d bytes)", len(body), c.s.maxFrame-frameOverhead)
	}
	r := c.r
	a, err := r.calls.call(ctx, func(call uint64) error {
		m := doMsg{id: r.id, call: call, method: method, path: path, body: body, hasBody: body != nil, contentType: contentType, header: header}
		if len(query) > 0 {
			m.query = query.Encode()
		}
		return c.s.out.send(frameDo, m.encode)
	})
	if err != nil {
		return 0, "", nil, err
	}
	if a.err != "" {
		return 0, "", nil, errors.New(a.err)
	}
	return a.status, a.contentType, a.body, nil
}

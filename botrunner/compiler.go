package botrunner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Defaults for the zero values of CompilerOptions.
const (
	DefaultCompileTimeout      = 10 * time.Second
	DefaultCompileMemory       = 256 << 20
	DefaultCompilesPerProject  = 2
	DefaultCompileQueueTimeout = 5 * time.Second
)

// ErrCompileBusy means every compile slot (the project's or all of them) stayed taken for
// CompilerOptions.QueueTimeout. Answer 429 with Retry-After.
var ErrCompileBusy = errors.New("too many bot compiles in progress")

// maxCompileAnswer bounds the answer frame a compile process may send: the compiled code with
// its inline source map is a few times the source, which $deploy bounds to a few MiB.
const maxCompileAnswer = 64 << 20

// maxCompileStderr is how much of a compile process's stderr is kept to tell a crash's cause.
const maxCompileStderr = 8 << 10

// checkedCodes bounds the memories of checked code (a hash and a verdict each).
const checkedCodes = 4096

// loadsInEngine remembers code a compile process compiled for the engine without error, within
// the timeout of the Compiler that ran it: a property of the code and this binary alone, so it
// outlives the Compiler. A config reload makes a new Compiler and a new in-process Runner with
// an empty program cache, and the Runner must not start a process per bot again.
var loadsInEngine = struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]struct{}
}{m: map[[sha256.Size]byte]struct{}{}}

// CompilerOptions configures a Compiler. The zero value of each field but Command means its
// default.
type CompilerOptions struct {
	// Command starts a compile process: the same command as PoolOptions.Command, which must end
	// up in ServeWorker (fhirgate's is the Caddy binary with "fhirgate bot-worker"); the
	// process's environment tells it to compile instead of serving runs. Required.
	Command []string

	// Timeout bounds one compile's wall-clock time; the process is killed when it passes, and
	// the compile fails with a CompileError naming the limit. Default: 10s.
	Timeout time.Duration

	// Memory caps a compile process's own resident memory, in bytes, as WorkerMemory caps a bot
	// worker's: its Go runtime is told to stay under 3/4 of it, and the process is killed
	// past it. Default: 256 MiB; at least MinWorkerMemory.
	Memory int64

	// MaxConcurrent bounds compile processes running at once. Default: GOMAXPROCS.
	MaxConcurrent int

	// MaxPerProject bounds one project's compiles running at once. Default: 2 (at most
	// MaxConcurrent).
	MaxPerProject int

	// QueueTimeout is how long a compile waits for a slot before it fails with
	// ErrCompileBusy. Default: 5s.
	QueueTimeout time.Duration

	// Logger receives what crashed compile processes print. Default: no logging.
	Logger *zap.Logger
}

// Compiler runs Compile, esbuild's transform and goja's compile, in a short-lived child process
// per compile, never on the caller's stack: source nested deeply enough to overflow the parsers'
// stacks crashes the child (a Go stack overflow cannot be recovered), source that takes goja's
// uninterruptible compiler minutes is killed at Timeout, and either way the compile fails with
// a *CompileError (answer 400) while the gateway carries on. Compiles are bounded in number,
// overall and per project. A Compiler is safe for concurrent use.
type Compiler struct {
	o      CompilerOptions
	slots  *compileSlots
	logger *zap.Logger

	mu     sync.Mutex
	failed map[[sha256.Size]byte]*CompileError // code that did not load, under this Compiler's limits

	spawns atomic.Int64 // compile processes started, for tests
}

// NewCompiler returns a Compiler with o's zero fields set to their defaults. It starts no
// process.
func NewCompiler(o CompilerOptions) (*Compiler, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("bot compile command is required")
	}
	if IsWorkerProcess() {
		return nil, errors.New("bot workers cannot start compile processes") // see NewPool
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultCompileTimeout
	}
	if o.Memory == 0 {
		o.Memory = DefaultCompileMemory
	}
	if o.Memory < MinWorkerMemory {
		return nil, fmt.Errorf("bot compile memory of %d bytes is below the minimum of %d MiB", o.Memory, MinWorkerMemory>>20)
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = runtime.GOMAXPROCS(0)
	}
	if o.MaxPerProject <= 0 {
		o.MaxPerProject = DefaultCompilesPerProject
	}
	o.MaxPerProject = min(o.MaxPerProject, o.MaxConcurrent)
	if o.QueueTimeout <= 0 {
		o.QueueTimeout = DefaultCompileQueueTimeout
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return &Compiler{
		o:      o,
		slots:  &compileSlots{max: o.MaxConcurrent, perProject: o.MaxPerProject, byProject: map[string]int{}, changed: make(chan struct{})},
		logger: o.Logger,
		failed: map[[sha256.Size]byte]*CompileError{},
	}, nil
}

// Compile is Compile(filename, source) in a compile process, for project (which keys the
// per-project bound). The Program carries the JavaScript and warnings; the runner compiles it
// for the engine where it runs. Errors: a *CompileError when the source does not compile, the
// compile passed Timeout or memory, or the compiler crashed on it; ErrCompileBusy when no slot
// freed up in QueueTimeout; ctx's error; any other error is the gateway's (no process could be
// started).
func (c *Compiler) Compile(ctx context.Context, project, filename, source string) (*Program, error) {
	if filename == "" {
		filename = "index.js"
	}
	ans, err := c.do(ctx, project, frameCompile, filename, source)
	if err != nil {
		return nil, err
	}
	c.remember(ans.js, nil) // it loaded in the engine, in the child
	return &Program{JS: ans.js, Warnings: ans.warnings}, nil
}

// Check tells whether compiled code (Program.JS) loads in the engine, by compiling it with goja
// in a compile process: a *CompileError if not, as Compile's. The answer for each code is
// remembered (any Compiler's output counts as checked, and so does code that passed a check
// earlier in this process), so only code not seen load costs a process: code stored before
// compiles ran in processes, say, which an in-process Runner checks once before compiling it in
// the gateway.
func (c *Compiler) Check(ctx context.Context, filename, js string) error {
	sum := sha256.Sum256([]byte(js))
	loadsInEngine.mu.Lock()
	_, ok := loadsInEngine.m[sum]
	loadsInEngine.mu.Unlock()
	if ok {
		return nil
	}
	c.mu.Lock()
	failed := c.failed[sum]
	c.mu.Unlock()
	if failed != nil {
		return failed
	}
	_, err := c.do(ctx, "", frameCheck, filename, js)
	var ce *CompileError
	if err == nil || errors.As(err, &ce) { // a verdict on the code, not on the moment
		c.remember(js, ce)
	}
	return err
}

// remember records whether js loaded (verdict nil) or not. Forgetting costs only a check, so a
// full memory is simply cleared: only distinct code fills it.
func (c *Compiler) remember(js string, verdict *CompileError) {
	sum := sha256.Sum256([]byte(js))
	if verdict == nil {
		loadsInEngine.mu.Lock()
		defer loadsInEngine.mu.Unlock()
		if len(loadsInEngine.m) >= checkedCodes {
			clear(loadsInEngine.m)
		}
		loadsInEngine.m[sum] = struct{}{}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.failed) >= checkedCodes {
		clear(c.failed)
	}
	c.failed[sum] = verdict
}

// do runs one request in a compile process, holding a slot.
func (c *Compiler) do(ctx context.Context, project string, typ byte, filename, src string) (*compileAnswer, error) {
	release, err := c.slots.acquire(ctx, project, c.o.QueueTimeout)
	if err != nil {
		return nil, err
	}
	defer release()
	ans, failure, err := c.spawn(ctx, typ, filename, src)
	if err != nil {
		return nil, err
	}
	if failure != "" {
		return nil, &CompileError{File: filename, Message: failure}
	}
	if !ans.ok {
		e := ans.err
		return nil, &e
	}
	return ans, nil
}

// spawn starts a compile process, sends it the request and waits for its answer. failure says
// why a process that gave no answer failed, in words for the bot's author; err is set only for
// the gateway's own failures and ctx's end.
func (c *Compiler) spawn(ctx context.Context, typ byte, filename, src string) (_ *compileAnswer, failure string, _ error) {
	child, err := startChild(c.o.Command, c.o.Memory, compileRole)
	if err != nil {
		return nil, "", err
	}
	cmd, inW, outR, errR := child.cmd, child.stdin, child.stdout, child.stderr
	c.spawns.Add(1)
	pid := cmd.Process.Pid

	stderr := make(chan []byte, 1)
	go func() {
		defer errR.Close()
		b, _ := io.ReadAll(io.LimitReader(errR, maxCompileStderr))
		_, _ = io.Copy(io.Discard, errR) // never block the child on a full pipe
		stderr <- b
	}()
	go func() {
		defer inW.Close() // the child reads one frame; EOF after it is harmless
		_ = (&frameWriter{w: inW}).send(typ, func(e *encoder) { e.str(filename); e.str(src) })
	}()
	type answer struct {
		m   *compileAnswer
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		defer outR.Close()
		var a answer
		t, payload, err := newFrameReader(outR, maxCompileAnswer).next()
		switch {
		case err != nil:
			a.err = err
		case t != frameCompiled:
			a.err = fmt.Errorf("answer frame is %q, not compiled", t)
		default:
			a.m = new(compileAnswer)
			a.err = a.m.decode(&decoder{b: payload})
		}
		answered <- a
	}()

	deadline := time.NewTimer(c.o.Timeout)
	defer deadline.Stop()
	rss := time.NewTicker(rssCheckInterval)
	defer rss.Stop()
	var a answer
	var killed string
wait:
	for {
		select {
		case a = <-answered:
			break wait
		case <-deadline.C:
			killed = fmt.Sprintf("compiling took longer than the limit of %v (bot_compile_timeout)", c.o.Timeout)
		case <-rss.C:
			if n, err := residentBytes(pid); err == nil && n > c.o.Memory {
				killed = fmt.Sprintf("compiling needed more than the compiler's memory limit of %d MiB", c.o.Memory>>20)
			}
		case <-ctx.Done():
			killed = "the request ended"
		}
		if killed != "" {
			break
		}
	}
	_ = cmd.Process.Kill() // answered, it is exiting anyway; killed, it must stop now
	exit := cmd.Wait()
	if killed != "" {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, killed, nil
	}
	if a.err == nil {
		return a.m, "", nil
	}
	// No answer: the process crashed. Go prints its reason first on stderr.
	var out []byte
	select {
	case out = <-stderr:
	case <-time.After(time.Second): // a grandchild holding the pipe; not ours to wait for
	}
	if bytes.Contains(out, []byte("stack overflow")) || bytes.Contains(out, []byte("stack exceeds")) {
		return nil, "the bot's source could not be compiled: the compiler ran out of stack (the code is nested too deeply)", nil
	}
	c.logger.Warn("bot compile process crashed", zap.Int("pid", pid), zap.String("exit", fmt.Sprint(exit)),
		zap.String("stderr", truncate(string(firstLine(out)), maxStderrLineSize)))
	return nil, fmt.Sprintf("the bot's source could not be compiled: the compiler crashed (%v)", exit), nil
}

func firstLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}

// compileSlots bounds compiles: at most max at once, and perProject of one project.
type compileSlots struct {
	max, perProject int

	mu        sync.Mutex
	running   int
	byProject map[string]int
	changed   chan struct{} // closed (and replaced) whenever a slot is given back
}

// acquire takes a slot for project, waiting up to wait; it returns the function that gives it
// back.
func (s *compileSlots) acquire(ctx context.Context, project string, wait time.Duration) (func(), error) {
	var timeout <-chan time.Time
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.mu.Lock()
		if s.running < s.max && s.byProject[project] < s.perProject {
			s.running++
			s.byProject[project]++
			s.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { s.release(project) }) }, nil
		}
		changed := s.changed
		s.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			return nil, ErrCompileBusy
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *compileSlots) release(project string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	if s.byProject[project]--; s.byProject[project] == 0 {
		delete(s.byProject, project)
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

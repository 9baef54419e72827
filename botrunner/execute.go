package botrunner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
)

// maxCallStack bounds JavaScript call depth, so runaway recursion is a quick error instead of
// eating memory until the deadline (goja's default is unbounded). It is below Node's ~10,000
// frames because recursion through native code (async functions, callbacks of map, getters)
// nests Go frames, and goja unwinds the overflow with one panic per level, which costs time
// quadratic in the depth: about 5 s of CPU at 10,000 async frames, a tenth of that at 3,000.
const maxCallStack = 3000

// interruptReason is the value a run is interrupted with.
type interruptReason int

const (
	stopTimeout   interruptReason = iota + 1 // the run's own timeout
	stopDeadline                             // the caller's context deadline
	stopCancelled                            // the caller's context was cancelled
	stopMemory                               // the heap watchdog saw the heap over its limit
)

// execution is a runtime with a bot's module loaded and the run going on in it: for vmcontext
// a fresh one per run, for awslambda a warm instance that serves one run after another (begin
// sets up each run). Only the goroutine of the current run touches it, except for rt.Interrupt
// from timers and the locked console buffer.
type execution struct {
	r   *Runner
	prg *programEntry

	// The current run, set by begin.
	ctx     context.Context // the caller's context
	req     *Request
	timeout time.Duration
	start   time.Time

	mu      sync.Mutex      // guards rt's publication, runID and stopped
	rt      *goja.Runtime   // set once by the first run's goroutine
	runID   uint64          // the current run; stopRun for another is ignored
	stopped interruptReason // why the run was interrupted, 0 while it may go on
	stuck   chan struct{}   // closed abandonGrace after an interrupt
	stopCh  chan struct{}   // closed when the run is stopped; made by stopSignal when needed

	console       consoleBuffer
	jsonStringify goja.Callable     // JSON.stringify, taken on first use
	objectProto   *goja.Object      // the realm's Object.prototype, taken on first use (dataObject)
	jsonKeys      map[string]string // object keys of decoded JSON, reused (jsonkeys.go)
	jsonStrings   *jsonStringCache  // short string values of decoded JSON, reused (jsonstrings.go)

	handler  goja.Callable // the module's handler, once its top level has run
	reusable bool          // the last run ended in a way that leaves the instance usable
	lastUsed time.Time     // when it went idle; guarded by the instance pool's lock
	pooled   bool          // handed out by the instance pool, which counts it as busy

	core       *goja.Object // '@medplum/core' exports, built on first use
	coreState  *lazyCore
	fhirtypes  *goja.Object
	urlExports *goja.Object
	fetchAPI   *goja.Object // fetch, Request, Response, Headers, FormData (fetch.go)

	loop    *eventLoop // the run's timers (timers.go), made on first use
	loopErr error      // a timer callback's or microtask's uncaught error, which ends the run
	lazy    lazyState  // other globals built on first use (globals.go)
}

func newExecution(r *Runner, prg *programEntry) *execution {
	return &execution{r: r, prg: prg, console: consoleBuffer{max: r.opts.MaxConsoleBytes}}
}

// begin sets x up for the run req and returns the run's id, for stopRun, and the channel
// closed when the run is stuck past its interrupt. The run is the instance's own until its
// goroutine gives it back.
func (x *execution) begin(ctx context.Context, req *Request, timeout time.Duration) (uint64, chan struct{}) {
	x.console.reset()
	x.reusable = false
	x.mu.Lock()
	defer x.mu.Unlock()
	x.runID++
	x.ctx, x.req, x.timeout, x.start = ctx, req, timeout, time.Now()
	x.stopped = 0
	x.stopCh = nil
	x.stuck = make(chan struct{})
	if x.rt != nil {
		x.rt.ClearInterrupt()
	}
	return x.runID, x.stuck
}

// seal ends run id; it reports whether x may serve another run: the run was not stopped and
// ended cleanly. Stops for run id that come later are ignored.
func (x *execution) seal(id uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	ok := x.runID == id && x.stopped == 0 && x.reusable && x.rt != nil
	x.runID++
	return ok
}

// stopFor stops the current run for the reason ctx (the caller's) says, or as timed out when
// ctx is live.
func (x *execution) stopFor(ctx context.Context) {
	x.stop(stopReason(ctx))
}

// stopRunFor is stopFor for run id only.
func (x *execution) stopRunFor(id uint64, ctx context.Context) {
	x.stopRun(id, stopReason(ctx))
}

func stopReason(ctx context.Context) interruptReason {
	switch err := ctx.Err(); {
	case err == nil:
		return stopTimeout
	case errors.Is(err, context.DeadlineExceeded):
		return stopDeadline
	default:
		return stopCancelled
	}
}

// stopRun stops run id, if it is still the current run (a timer of a warm instance's earlier
// run must not stop a later one).
func (x *execution) stopRun(id uint64, reason interruptReason) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.runID == id {
		x.stopLocked(reason)
	}
}

// stop interrupts the current run (once; later reasons are ignored). JavaScript stops at its
// next instruction; if the run has not ended abandonGrace later, stuck is closed so Run can
// answer.
func (x *execution) stop(reason interruptReason) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.stopLocked(reason)
}

func (x *execution) stopLocked(reason interruptReason) {
	if x.stopped != 0 {
		return
	}
	x.stopped = reason
	if x.stopCh != nil {
		close(x.stopCh)
	}
	if x.rt != nil {
		x.rt.Interrupt(reason)
	}
	// The timer holds only the channel: holding x would keep the stopped run's runtime, and all
	// it allocated, reachable for abandonGrace, and the heap watchdog would stop the next runs.
	stuck := x.stuck
	time.AfterFunc(abandonGrace, func() { close(stuck) })
}

// run executes the bot and maps how it ended into a Result. It never panics.
func (x *execution) run() (res *Result) {
	defer func() {
		if p := recover(); p != nil {
			if err, ok := p.(error); ok && isUncatchable(err) {
				res = x.errorResult(err)
			} else {
				res = x.failure(OutcomeError, fmt.Sprintf("internal error in the bot runtime: %v", p))
			}
		}
		res.Duration = time.Since(x.start)
		res.Console, res.ConsoleTruncated = x.console.String()
		finish(res)
	}()

	if x.rt == nil {
		rt := goja.New()
		rt.SetMaxCallStackSize(maxCallStack)
		// eval and new Function must not read source maps from the host filesystem either.
		rt.SetParserOptions(parser.WithDisableSourceMaps)
		x.mu.Lock()
		x.rt = rt
		if x.stopped != 0 {
			rt.Interrupt(x.stopped)
		}
		x.mu.Unlock()
		if !x.prg.noRegExp {
			x.guardRegExps()
		}
	}

	v, err := x.callHandler()
	if err != nil {
		res = x.errorResult(err)
		// A handler that threw or rejected leaves its instance usable, as on Lambda; a module
		// whose top level threw, or a run stopped uncatchably, does not.
		x.reusable = x.handler != nil && !isUncatchable(err)
		return res
	}
	res = x.mapResult(v)
	x.reusable = x.handler != nil
	return res
}

// callHandler loads the module (on an instance's first run), finds its handler and calls it.
// When the handler returns a promise, the promise's jobs have all run by the time the call
// returns (goja drains its job queue when control leaves the runtime), so a promise still
// pending can only settle through the run's event loop (timers.go), which await runs.
func (x *execution) callHandler() (goja.Value, error) {
	rt := x.rt
	first := x.handler == nil
	if first {
		x.installGlobals()
	}
	defer x.endLoop() // timers never outlive the run
	// On the first run the event is built before bot code runs, so nothing the module does to
	// prototypes shows in it. A warm instance's later events are built in the runtime the
	// module's top level already ran in, as on Lambda.
	var event *goja.Object
	if ex := rt.Try(func() { event = x.newEvent(&x.req.Event) }); ex != nil {
		return nil, ex
	}
	if first {
		handler, err := x.loadModule()
		if err != nil {
			return nil, err
		}
		x.handler = handler
		x.r.loads.Add(1)
	}

	v, err := x.handler(goja.Undefined(), x.medplumArg(), event)
	if err != nil {
		return nil, err
	}
	if o, ok := v.(*goja.Object); ok {
		if p, ok := o.Export().(*goja.Promise); ok {
			return x.await(p)
		}
	}
	return v, nil
}

// loadModule runs the module's top level and returns its handler.
func (x *execution) loadModule() (goja.Callable, error) {
	rt := x.rt
	modFn, err := rt.RunProgram(x.prg.prg)
	if err != nil {
		return nil, err
	}
	load, ok := goja.AssertFunction(modFn)
	if !ok {
		return nil, errors.New("bot code is not a module: it did not compile to a function")
	}
	module, exports := rt.NewObject(), rt.NewObject()
	_ = module.Set("exports", exports)
	_ = module.Set("id", x.prg.filename)
	if _, err := load(goja.Undefined(), exports, x.fn("require", x.require), module, rt.ToValue(x.prg.filename), rt.ToValue("/")); err != nil {
		return nil, err
	}
	var handler goja.Callable
	if ex := rt.Try(func() { handler = findHandler(module.Get("exports")) }); ex != nil {
		return nil, ex
	}
	if handler == nil {
		return nil, errors.New("bot does not export a handler function")
	}
	return handler, nil
}

// findHandler accepts every CommonJS and ESM shape: exports.handler, module.exports.handler,
// module.exports = {handler}, module.exports = function, export function handler, and an ESM
// default export that is the handler or holds it.
func findHandler(exports goja.Value) goja.Callable {
	obj, ok := exports.(*goja.Object)
	if !ok {
		return nil
	}
	if h, ok := goja.AssertFunction(obj.Get("handler")); ok {
		return h
	}
	if h, ok := goja.AssertFunction(obj); ok {
		return h
	}
	if def, ok := obj.Get("default").(*goja.Object); ok {
		if h, ok := goja.AssertFunction(def); ok {
			return h
		}
		if h, ok := goja.AssertFunction(def.Get("handler")); ok {
			return h
		}
	}
	return nil
}

// require answers '@medplum/core' (and the type-only '@medplum/fhirtypes') and the Node modules
// of nodeModules.
func (x *execution) require(call goja.FunctionCall) goja.Value {
	switch name := call.Argument(0).String(); name {
	case "@medplum/core":
		return x.coreModule()
	case "node-fetch", "form-data":
		return x.fetchRequire(name)
	case "@medplum/fhirtypes":
		if x.fhirtypes == nil {
			x.fhirtypes = x.rt.NewObject()
		}
		return x.fhirtypes
	default:
		if m := nodeModules[strings.TrimPrefix(name, "node:")]; m != nil {
			return m(x)
		}
		e := x.newError("Error", fmt.Sprintf("Cannot find module '%s' (the bot sandbox provides only '@medplum/core', 'buffer', 'crypto', 'timers', 'timers/promises', 'node-fetch' and 'form-data')", truncate(name, 100)))
		_ = e.Set("code", "MODULE_NOT_FOUND")
		panic(e)
	}
}

// rejection is a handler promise that was rejected with reason.
type rejection struct{ reason goja.Value }

func (e *rejection) Error() string { return "bot handler's promise was rejected" }

func isUncatchable(err error) bool {
	var ie *goja.InterruptedError
	var so *goja.StackOverflowError
	return errors.As(err, &ie) || errors.As(err, &so)
}

// errorResult maps a failed run: interrupted, stack overflow, thrown or rejected.
func (x *execution) errorResult(err error) *Result {
	var ie *goja.InterruptedError
	var so *goja.StackOverflowError
	var ex *goja.Exception
	var rej *rejection
	switch {
	case errors.As(err, &ie):
		return x.interrupted(ie.Value())
	case errors.As(err, &so):
		x.console.write("[error] ", "Unhandled error: RangeError: Maximum call stack size exceeded")
		return x.failure(OutcomeError, "Maximum call stack size exceeded")
	case errors.As(err, &ex):
		x.console.write("[error] ", "Unhandled error: "+strings.TrimRight(ex.String(), "\n"))
		return x.thrownFailure(ex.Value())
	case errors.As(err, &rej):
		x.console.write("[error] ", "Unhandled rejection: "+x.formatValue(rej.reason, true))
		return x.thrownFailure(rej.reason)
	}
	return x.failure(OutcomeError, err.Error())
}

const (
	deadlineMessage  = "bot execution stopped: the request's deadline passed"
	cancelledMessage = "bot execution cancelled: the request was cancelled"
)

// interrupted is the Result of a run stopped for reason (an interruptReason).
func (x *execution) interrupted(reason any) *Result {
	switch reason {
	case stopTimeout:
		return x.failure(OutcomeTimeout, "bot execution timed out after "+x.timeout.String())
	case stopDeadline:
		return x.failure(OutcomeTimeout, deadlineMessage)
	case stopCancelled:
		return x.failure(OutcomeError, cancelledMessage)
	case stopMemory:
		return x.failure(OutcomeError, x.r.heap.message)
	}
	return x.failure(OutcomeError, "bot execution interrupted")
}

// errorString is Medplum's normalizeErrorString of a thrown value, from the sandbox's own
// '@medplum/core', so a thrown OperationOutcomeError reads as its outcome.
func (x *execution) errorString(v goja.Value) (s string) {
	const fallback = "bot threw a value that cannot be described"
	defer func() {
		if recover() != nil {
			s = fallback
		}
	}()
	ex := x.rt.Try(func() {
		fn, ok := goja.AssertFunction(x.coreModule().Get("normalizeErrorString"))
		if !ok {
			panic(x.rt.NewTypeError("normalizeErrorString is gone"))
		}
		r, err := fn(goja.Undefined(), v)
		if err != nil {
			panic(err)
		}
		s = r.String()
	})
	if ex != nil {
		return fallback
	}
	return s
}

// failure is an error or timeout Result; finish adds its OperationOutcome body.
func (x *execution) failure(o Outcome, msg string) *Result {
	return &Result{Outcome: o, Message: msg}
}

// drop lets the runtime and everything the bot built go as soon as the run has ended: the
// execution itself stays reachable a little longer (from the run's goroutine, timers and the
// heap watchdog), and must not keep a stopped memory bomb's heap alive with it.
func (x *execution) drop() {
	x.mu.Lock()
	x.rt = nil
	x.mu.Unlock()
	x.jsonStringify, x.objectProto, x.core, x.coreState, x.fhirtypes, x.urlExports = nil, nil, nil, nil, nil, nil
	x.fetchAPI = nil
	x.loop, x.loopErr, x.lazy = nil, nil, lazyState{}
	x.handler, x.jsonStrings = nil, nil
}

// abandoned is the Result of a run that did not stop within abandonGrace of being interrupted.
// The run goroutine still owns the runtime, so only the locked console is read.
func (x *execution) abandoned() *Result {
	x.mu.Lock()
	reason := x.stopped
	x.mu.Unlock()
	res := x.interrupted(reason)
	res.Duration = time.Since(x.start)
	res.Console, res.ConsoleTruncated = x.console.String()
	return finish(res)
}

// fn makes a native function with a JavaScript name, which is what stack traces show (goja would
// otherwise name it after the Go function).
func (x *execution) fn(name string, f func(goja.FunctionCall) goja.Value) goja.Value {
	o := x.rt.ToValue(f).(*goja.Object)
	_ = o.DefineDataProperty("name", x.rt.ToValue(name), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	return o
}

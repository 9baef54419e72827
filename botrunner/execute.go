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

// execution is one run: a fresh runtime and everything built in it. Only the run goroutine
// touches it, except for rt.Interrupt from timers and the locked console buffer.
type execution struct {
	r       *Runner
	ctx     context.Context // the caller's context
	req     *Request
	prg     *programEntry
	timeout time.Duration
	start   time.Time

	mu      sync.Mutex      // guards rt's publication and stopped
	rt      *goja.Runtime   // set once by the run goroutine
	stopped interruptReason // why the run was interrupted, 0 while it may go on
	stuck   chan struct{}   // closed abandonGrace after an interrupt

	console       consoleBuffer
	jsonStringify goja.Callable // JSON.stringify, taken on first use

	core       *goja.Object // '@medplum/core' exports, built on first use
	coreState  *lazyCore
	fhirtypes  *goja.Object
	urlExports *goja.Object
}

func newExecution(r *Runner, ctx context.Context, req *Request, prg *programEntry, timeout time.Duration) *execution {
	return &execution{
		r:       r,
		ctx:     ctx,
		req:     req,
		prg:     prg,
		timeout: timeout,
		start:   time.Now(),
		stuck:   make(chan struct{}),
		console: consoleBuffer{max: r.opts.MaxConsoleBytes},
	}
}

// stopFor stops the run for the reason ctx (the caller's) says, or as timed out when ctx is live.
func (x *execution) stopFor(ctx context.Context) {
	switch err := ctx.Err(); {
	case err == nil:
		x.stop(stopTimeout)
	case errors.Is(err, context.DeadlineExceeded):
		x.stop(stopDeadline)
	default:
		x.stop(stopCancelled)
	}
}

// stop interrupts the run (once; later reasons are ignored). JavaScript stops at its next
// instruction; if the run has not ended abandonGrace later, stuck is closed so Run can answer.
func (x *execution) stop(reason interruptReason) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.stopped != 0 {
		return
	}
	x.stopped = reason
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
		x.drop()
	}()

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

	v, err := x.callHandler()
	if err != nil {
		return x.errorResult(err)
	}
	return x.mapResult(v)
}

// callHandler loads the module, finds its handler and calls it. When the handler returns a
// promise, the promise's jobs have all run by the time the call returns (goja drains its job
// queue when control leaves the runtime), so a promise still pending will never settle.
func (x *execution) callHandler() (goja.Value, error) {
	rt := x.rt
	x.installGlobals()
	// The event is built before bot code runs, so nothing the module does to prototypes shows in it.
	var event *goja.Object
	if ex := rt.Try(func() { event = x.newEvent(&x.req.Event) }); ex != nil {
		return nil, ex
	}

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

	v, err := handler(goja.Undefined(), x.medplumArg(), event)
	if err != nil {
		return nil, err
	}
	if o, ok := v.(*goja.Object); ok {
		if p, ok := o.Export().(*goja.Promise); ok {
			switch p.State() {
			case goja.PromiseStateFulfilled:
				return p.Result(), nil
			case goja.PromiseStateRejected:
				return nil, &rejection{reason: p.Result()}
			default:
				return nil, errors.New("bot handler's promise never settled")
			}
		}
	}
	return v, nil
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

// require answers only '@medplum/core' (and the type-only '@medplum/fhirtypes').
func (x *execution) require(call goja.FunctionCall) goja.Value {
	switch name := call.Argument(0).String(); name {
	case "@medplum/core":
		return x.coreModule()
	case "@medplum/fhirtypes":
		if x.fhirtypes == nil {
			x.fhirtypes = x.rt.NewObject()
		}
		return x.fhirtypes
	default:
		e := x.newError("Error", fmt.Sprintf("Cannot find module '%s' (the bot sandbox provides only '@medplum/core')", truncate(name, 100)))
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
		return x.failure(OutcomeError, x.errorString(ex.Value()))
	case errors.As(err, &rej):
		x.console.write("[error] ", "Unhandled rejection: "+x.formatValue(rej.reason, true))
		return x.failure(OutcomeError, x.errorString(rej.reason))
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
	x.jsonStringify, x.core, x.coreState, x.fhirtypes, x.urlExports = nil, nil, nil, nil, nil
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

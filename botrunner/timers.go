package botrunner

import (
	"container/heap"
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// The per-run event loop: setTimeout, setInterval, setImmediate (and their clear functions) and
// queueMicrotask. goja runs promise jobs whenever control leaves the runtime, so a handler that
// only awaits medplum calls (whose promises are already settled) needs no loop; a handler whose
// promise is still pending when it returns waits here for its timers, on the run's own goroutine,
// until the promise settles. Then the run ends and every pending timer is dropped, so no timer
// ever fires in a later run of a warm instance. A run waiting on timers past its deadline is
// stopped like any other: the wait ends when the run is stopped, and the interrupt surfaces as
// the run's timeout.
//
// goja_nodejs's eventloop does not fit: it creates and owns its runtime (a warm instance's
// runtime outlives any one loop), runs JavaScript on its own goroutine, and has no notion of a
// run ending with its timers.

// maxTimers bounds the timers one run may have pending, so a bot cannot grow the Go-side
// timer queue without bound (a timer is a few hundred bytes the heap watchdog does see, but a
// clear error is better than a memory stop).
const maxTimers = 100_000

// maxTimerDelay is Node's largest delay (2^31-1 ms); a larger or invalid delay is 1 ms, as there.
const maxTimerDelay = math.MaxInt32

type loopTimer struct {
	id       int64
	seq      int64 // scheduling order, which breaks ties between timers due at once
	due      time.Time
	interval time.Duration // > 0 for setInterval
	fn       goja.Callable
	args     []goja.Value
	unref    bool
	index    int // in the heap, -1 when not scheduled
	handle   *goja.Object
}

type timerHeap []*loopTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(v any) {
	t := v.(*loopTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}

// eventLoop is an execution's timers, created on the first use of a timer global. Only the run's
// goroutine touches it, except post, which other goroutines use to hand it completions.
type eventLoop struct {
	x          *execution
	timers     timerHeap
	byID       map[int64]*loopTimer
	immediates []*loopTimer // FIFO; cancelled ones have index -2
	nextID     int64
	seq        int64
	proto      *goja.Object // prototype of the handles setTimeout returns

	// Host work (a fetch) running on goroutines of its own: ctx ends at the run's deadline,
	// when its caller goes, or when the run ends; made by the first spawn.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	posted  []func() error // completions of spawned work, to run on the run's goroutine
	pending int            // spawned work not yet completed
	gen     uint64         // bumped by reset, so late completions of an ended run are dropped
	wake    chan struct{}
}

// timerSymbol holds a timer handle's id.
var timerSymbol = goja.NewSymbol("timerId")

func (x *execution) eventLoop() *eventLoop {
	if x.loop == nil {
		x.loop = &eventLoop{x: x, byID: map[int64]*loopTimer{}, wake: make(chan struct{}, 1)}
	}
	return x.loop
}

// timerGlobal builds one of the timer globals.
func timerGlobal(name string) func(x *execution) goja.Value {
	return func(x *execution) goja.Value {
		l := x.eventLoop()
		switch name {
		case "setTimeout":
			return x.fn(name, func(c goja.FunctionCall) goja.Value { return l.schedule(c, false) })
		case "setInterval":
			return x.fn(name, func(c goja.FunctionCall) goja.Value { return l.schedule(c, true) })
		case "setImmediate":
			return x.fn(name, l.setImmediate)
		case "queueMicrotask":
			return x.fn(name, l.queueMicrotask)
		default: // clearTimeout, clearInterval, clearImmediate: any handle clears any timer, as in Node
			return x.fn(name, func(c goja.FunctionCall) goja.Value {
				l.clear(c.Argument(0))
				return goja.Undefined()
			})
		}
	}
}

func (l *eventLoop) callback(c goja.FunctionCall, what string) goja.Callable {
	fn, ok := goja.AssertFunction(c.Argument(0))
	if !ok {
		e := l.x.newError("TypeError", `The "callback" argument must be of type function. Received `+l.x.formatValue(c.Argument(0), false))
		_ = e.Set("code", "ERR_INVALID_ARG_TYPE")
		panic(e)
	}
	if len(l.byID) >= maxTimers {
		panic(l.x.newError("RangeError", what+": too many pending timers (the limit is 100000 a run)"))
	}
	return fn
}

func (l *eventLoop) schedule(c goja.FunctionCall, repeat bool) goja.Value {
	fn := l.callback(c, "setTimeout")
	delay := timerDelay(c.Argument(1))
	var args []goja.Value
	if len(c.Arguments) > 2 {
		args = append(args, c.Arguments[2:]...)
	}
	t := l.add(fn, args)
	if repeat {
		t.interval = delay
	}
	t.due = time.Now().Add(delay)
	heap.Push(&l.timers, t)
	return l.handle(t)
}

// timerDelay is Node's delay: a number of milliseconds in [1, 2^31-1], 1 for anything else.
func timerDelay(v goja.Value) time.Duration {
	ms := v.ToFloat()
	if math.IsNaN(ms) || ms < 1 || ms > maxTimerDelay {
		ms = 1
	}
	return time.Duration(ms * float64(time.Millisecond))
}

func (l *eventLoop) add(fn goja.Callable, args []goja.Value) *loopTimer {
	l.nextID++
	l.seq++
	t := &loopTimer{id: l.nextID, seq: l.seq, fn: fn, args: args, index: -1}
	l.byID[t.id] = t
	return t
}

func (l *eventLoop) setImmediate(c goja.FunctionCall) goja.Value {
	fn := l.callback(c, "setImmediate")
	var args []goja.Value
	if len(c.Arguments) > 1 {
		args = append(args, c.Arguments[1:]...)
	}
	t := l.add(fn, args)
	l.immediates = append(l.immediates, t)
	return l.handle(t)
}

// queueMicrotask runs fn as a promise job; a throw in it ends the run as a timer's would.
func (l *eventLoop) queueMicrotask(c goja.FunctionCall) goja.Value {
	fn, ok := goja.AssertFunction(c.Argument(0))
	if !ok {
		e := l.x.newError("TypeError", `The "callback" argument must be of type function. Received `+l.x.formatValue(c.Argument(0), false))
		_ = e.Set("code", "ERR_INVALID_ARG_TYPE")
		panic(e)
	}
	rt := l.x.rt
	p, resolve, _ := rt.NewPromise()
	then, _ := goja.AssertFunction(rt.ToValue(p).(*goja.Object).Get("then"))
	job := l.x.fn("microtask", func(goja.FunctionCall) goja.Value {
		if _, err := fn(goja.Undefined()); err != nil {
			l.fail(err)
		}
		return goja.Undefined()
	})
	if _, err := then(rt.ToValue(p), job); err != nil {
		panic(err)
	}
	_ = resolve(goja.Undefined())
	return goja.Undefined()
}

// fail records the first uncaught error of a callback; the run ends with it.
func (l *eventLoop) fail(err error) {
	if l.x.loopErr == nil {
		l.x.loopErr = err
	}
}

// handle is what setTimeout returns: like Node's Timeout, an object with ref, unref, hasRef,
// refresh and close that converts to its numeric id.
func (l *eventLoop) handle(t *loopTimer) *goja.Object {
	rt := l.x.rt
	if l.proto == nil {
		l.proto = l.newTimerProto()
	}
	o := rt.NewObject()
	_ = o.SetPrototype(l.proto)
	_ = o.DefineDataPropertySymbol(timerSymbol, rt.ToValue(t.id), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE)
	t.handle = o
	return o
}

func (l *eventLoop) newTimerProto() *goja.Object {
	rt := l.x.rt
	p := rt.NewObject()
	timer := func(this goja.Value) *loopTimer {
		if o, ok := this.(*goja.Object); ok {
			if id := o.GetSymbol(timerSymbol); id != nil {
				return l.byID[id.ToInteger()]
			}
		}
		return nil
	}
	method := func(name string, f func(t *loopTimer)) {
		_ = p.Set(name, l.x.fn(name, func(c goja.FunctionCall) goja.Value {
			if t := timer(c.This); t != nil {
				f(t)
			}
			return c.This
		}))
	}
	method("ref", func(t *loopTimer) { t.unref = false })
	method("unref", func(t *loopTimer) { t.unref = true })
	method("refresh", func(t *loopTimer) {
		if t.index >= 0 {
			d := t.interval
			if d == 0 {
				d = time.Until(t.due)
			}
			t.due = time.Now().Add(max(d, time.Millisecond))
			heap.Fix(&l.timers, t.index)
		}
	})
	_ = p.Set("close", l.x.fn("close", func(c goja.FunctionCall) goja.Value {
		l.clear(c.This)
		return c.This
	}))
	_ = p.Set("hasRef", l.x.fn("hasRef", func(c goja.FunctionCall) goja.Value {
		t := timer(c.This)
		return rt.ToValue(t != nil && !t.unref)
	}))
	_ = p.SetSymbol(goja.SymToPrimitive, l.x.fn("[Symbol.toPrimitive]", func(c goja.FunctionCall) goja.Value {
		if o, ok := c.This.(*goja.Object); ok {
			if id := o.GetSymbol(timerSymbol); id != nil {
				return id
			}
		}
		return goja.NaN()
	}))
	return p
}

func (l *eventLoop) clear(v goja.Value) {
	var id int64
	switch {
	case v == nil || goja.IsUndefined(v) || goja.IsNull(v):
		return
	case isObject(v):
		idv := v.(*goja.Object).GetSymbol(timerSymbol)
		if idv == nil {
			return
		}
		id = idv.ToInteger()
	default:
		id = v.ToInteger()
	}
	t := l.byID[id]
	if t == nil {
		return
	}
	delete(l.byID, id)
	if t.index >= 0 {
		heap.Remove(&l.timers, t.index)
	}
	t.index = -2 // an immediate still in the queue is skipped
}

func isObject(v goja.Value) bool {
	_, ok := v.(*goja.Object)
	return ok
}

// spawn runs work on a goroutine of its own (a fetch, answered by the network or, in a worker,
// over the pipe) with a context that ends at the run's deadline, when its caller goes, or when
// the run ends. The function work returns runs later on the run's goroutine, where the runtime
// may be touched (it settles the work's promise); an error it returns ends the run. The loop
// waits for pending work while the handler's promise is pending; work still going when the run
// ends is abandoned and its completion dropped.
func (l *eventLoop) spawn(work func(ctx context.Context) func() error) {
	if l.ctx == nil {
		x := l.x
		x.mu.Lock()
		parent, deadline := x.ctx, x.start.Add(x.timeout)
		x.mu.Unlock()
		l.ctx, l.cancel = context.WithDeadline(parent, deadline)
	}
	ctx := l.ctx
	l.mu.Lock()
	l.pending++
	gen := l.gen
	l.mu.Unlock()
	go func() {
		done := work(ctx)
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.gen != gen {
			return
		}
		l.pending--
		l.posted = append(l.posted, done)
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}()
}

// reset drops every timer and pending operation: the run has ended.
func (l *eventLoop) reset() {
	clear(l.byID)
	clear(l.timers)
	l.timers = l.timers[:0]
	clear(l.immediates)
	l.immediates = l.immediates[:0]
	if l.cancel != nil {
		l.cancel()
		l.ctx, l.cancel = nil, nil
	}
	l.mu.Lock()
	l.gen++
	l.pending = 0
	l.posted = nil
	l.mu.Unlock()
	select {
	case <-l.wake:
	default:
	}
}

// await runs the loop until p settles and returns p's value, or the error that ended the run:
// a callback's uncaught throw, an interrupt, or nothing left that could settle p.
func (x *execution) await(p *goja.Promise) (goja.Value, error) {
	for p.State() == goja.PromiseStatePending {
		if x.loopErr != nil {
			return nil, x.loopErr
		}
		if x.loop == nil {
			return nil, errors.New("bot handler's promise never settled")
		}
		more, err := x.loop.next()
		if err != nil {
			return nil, err
		}
		if !more {
			return nil, errors.New("bot handler's promise never settled (no timer or operation was pending)")
		}
	}
	if x.loopErr != nil {
		return nil, x.loopErr
	}
	if p.State() == goja.PromiseStateRejected {
		return nil, &rejection{reason: p.Result()}
	}
	return p.Result(), nil
}

// next runs the next callback, waiting for it if need be. It reports false when nothing is left
// that could run.
func (l *eventLoop) next() (bool, error) {
	for {
		l.mu.Lock()
		posted := l.posted
		l.posted = nil
		pending := l.pending
		l.mu.Unlock()
		if len(posted) > 0 {
			if l.ctx != nil && l.ctx.Err() != nil {
				// The run's time is up (or its caller left) and the work's completion is most
				// likely that error: the run ends as timed out (or cancelled), not with a
				// rejection the bot could catch.
				l.x.stopFor(l.x.ctx)
				return false, l.interrupt()
			}
			for _, f := range posted {
				var err error
				if ex := l.x.rt.Try(func() { err = f() }); ex != nil {
					return false, ex
				}
				if err != nil {
					return false, err
				}
			}
			return true, nil
		}
		if len(l.immediates) > 0 {
			batch := l.immediates
			l.immediates = nil
			for _, t := range batch {
				if t.index == -2 {
					continue
				}
				delete(l.byID, t.id)
				if err := l.fire(t); err != nil {
					return false, err
				}
			}
			return true, nil
		}
		var t *loopTimer
		if len(l.timers) > 0 {
			t = l.timers[0]
		}
		if pending == 0 && !l.anyRef() {
			return false, nil
		}
		if t != nil && !time.Now().Before(t.due) {
			heap.Pop(&l.timers)
			if t.interval > 0 {
				t.due = time.Now().Add(t.interval)
				heap.Push(&l.timers, t)
			} else {
				delete(l.byID, t.id)
			}
			return true, l.fire(t)
		}
		if err := l.wait(t); err != nil {
			return false, err
		}
	}
}

func (l *eventLoop) anyRef() bool {
	for _, t := range l.timers {
		if !t.unref {
			return true
		}
	}
	return false
}

func (l *eventLoop) fire(t *loopTimer) error {
	_, err := t.fn(goja.Undefined(), t.args...)
	if err == nil {
		err = l.x.loopErr
	}
	return err
}

// wait sleeps until t is due, an async operation completes or the run is stopped; a stop
// returns the run's interrupt as an error.
func (l *eventLoop) wait(t *loopTimer) error {
	stopped := l.x.stopSignal()
	var due <-chan time.Time
	if t != nil {
		tm := time.NewTimer(time.Until(t.due))
		defer tm.Stop()
		due = tm.C
	}
	select {
	case <-due:
	case <-l.wake:
	case <-stopped:
		return l.interrupt()
	}
	return nil
}

// interrupt surfaces the stopped run's interrupt: running anything in an interrupted runtime
// raises it, which is how the run ends as timed out (or cancelled) with everything else a stop
// does.
func (l *eventLoop) interrupt() error {
	_, err := l.x.rt.RunProgram(nopProgram())
	if err == nil {
		err = errors.New("bot execution interrupted")
	}
	return err
}

var nopProgram = embeddedProgram("nop", "undefined")

// stopSignal is closed when the current run is stopped.
func (x *execution) stopSignal() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.stopCh == nil {
		x.stopCh = make(chan struct{})
		if x.stopped != 0 {
			close(x.stopCh)
		}
	}
	return x.stopCh
}

// endLoop drops the run's timers: called when the handler's promise settled or the run failed.
func (x *execution) endLoop() {
	x.loopErr = nil
	if x.loop != nil {
		x.loop.reset()
	}
}

// timersModule is require('timers'): the timer globals.
func (x *execution) timersModule() *goja.Object {
	if x.lazy.timers == nil {
		m := x.rt.NewObject()
		for _, name := range []string{"setTimeout", "clearTimeout", "setInterval", "clearInterval", "setImmediate", "clearImmediate", "queueMicrotask"} {
			_ = m.Set(name, x.rt.GlobalObject().Get(name))
		}
		x.lazy.timers = m
	}
	return x.lazy.timers
}

// timersPromisesModule is require('timers/promises'): setTimeout(delay, value) and
// setImmediate(value) as promises of value.
func (x *execution) timersPromisesModule() *goja.Object {
	if x.lazy.timersPromises != nil {
		return x.lazy.timersPromises
	}
	rt, l := x.rt, x.eventLoop()
	promised := func(name string, schedule func(resolve goja.Value, c goja.FunctionCall)) goja.Value {
		return x.fn(name, func(c goja.FunctionCall) goja.Value {
			p, resolve, _ := rt.NewPromise()
			value := c.Argument(0)
			if name == "setTimeout" {
				value = c.Argument(1)
			}
			schedule(x.fn("resolve", func(goja.FunctionCall) goja.Value {
				_ = resolve(value)
				return goja.Undefined()
			}), c)
			return rt.ToValue(p)
		})
	}
	m := rt.NewObject()
	_ = m.Set("setTimeout", promised("setTimeout", func(resolve goja.Value, c goja.FunctionCall) {
		l.schedule(goja.FunctionCall{Arguments: []goja.Value{resolve, c.Argument(0)}}, false)
	}))
	_ = m.Set("setImmediate", promised("setImmediate", func(resolve goja.Value, _ goja.FunctionCall) {
		l.setImmediate(goja.FunctionCall{Arguments: []goja.Value{resolve}})
	}))
	x.lazy.timersPromises = m
	return m
}

package botrunner

import (
	"context"
	"sync"

	"github.com/dop251/goja"
)

// runLoop is a run's event loop. Host work that must not hold the run's goroutine (a fetch)
// runs on a goroutine of its own and posts its completion here; the run's goroutine, once the
// handler has returned a promise still pending, runs the completions in the runtime (which
// settles promises and drains their jobs) until the promise settles, nothing is left to wait
// for, or the run is stopped. The loop lives for one run: its context ends when the run ends,
// so work still going is abandoned, and completions posted later are dropped.
type runLoop struct {
	ctx    context.Context // ends at the run's deadline, when its caller goes, or when it ends
	cancel context.CancelFunc

	mu      sync.Mutex
	queue   []func() error // completions to run on the run's goroutine
	pending int            // work started and not yet posted
	closed  bool
	wake    chan struct{} // signalled on post and on interrupt; buffered
}

// eventLoop returns the current run's loop, made on first use.
func (x *execution) eventLoop() *runLoop {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.loop == nil {
		ctx, cancel := context.WithDeadline(x.ctx, x.start.Add(x.timeout))
		x.loop = &runLoop{ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1)}
	}
	return x.loop
}

// spawn runs work on a goroutine of its own with the loop's context; the function work returns
// is run later on the run's goroutine (where the runtime may be touched).
func (l *runLoop) spawn(work func(ctx context.Context) func() error) {
	l.mu.Lock()
	l.pending++
	l.mu.Unlock()
	go func() {
		done := work(l.ctx)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.pending--
		if l.closed {
			return
		}
		l.queue = append(l.queue, done)
		l.signal()
	}()
}

// signal wakes the run's goroutine; l.mu held or not, it never blocks.
func (l *runLoop) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// next returns the next completion, waiting while work is pending. It returns nil when there
// is nothing left to wait for, or when the loop's context ended.
func (l *runLoop) next(stopped func() bool) func() error {
	for {
		l.mu.Lock()
		if len(l.queue) > 0 {
			f := l.queue[0]
			l.queue = l.queue[1:]
			l.mu.Unlock()
			return f
		}
		idle := l.pending == 0
		l.mu.Unlock()
		if idle || stopped() {
			return nil
		}
		select {
		case <-l.wake:
		case <-l.ctx.Done():
			return nil
		}
	}
}

func (l *runLoop) close() {
	l.mu.Lock()
	l.closed = true
	l.queue = nil
	l.mu.Unlock()
	l.cancel()
}

// closeLoop ends the run's loop, if it has one: work still going is abandoned.
func (x *execution) closeLoop() {
	x.mu.Lock()
	l := x.loop
	x.loop = nil
	x.mu.Unlock()
	if l != nil {
		l.close()
	}
}

// settle is the end of a handler call: when the handler returned a pending promise and host
// work is pending, it runs the loop until the promise settles or nothing is left to wait for.
// A run stopped while waiting (its deadline, its caller gone, the heap watchdog) surfaces as
// the runtime's interrupt.
func (x *execution) settle(v goja.Value, err error) (goja.Value, error) {
	x.mu.Lock()
	l := x.loop
	x.mu.Unlock()
	if l == nil || err != nil {
		return v, err
	}
	o, ok := v.(*goja.Object)
	if !ok {
		return v, nil
	}
	p, ok := o.Export().(*goja.Promise)
	if !ok {
		return v, nil
	}
	stopped := func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		return x.stopped != 0
	}
	for p.State() == goja.PromiseStatePending {
		f := l.next(stopped)
		if f == nil || l.ctx.Err() != nil {
			// Past the deadline, a completion (most likely the deadline's own error) is not
			// given to the bot: the run ends as timed out below.
			break
		}
		if err := f(); err != nil {
			return nil, err
		}
	}
	if p.State() == goja.PromiseStatePending && (stopped() || l.ctx.Err() != nil) {
		// The run's time is up (or its caller left): end it as such, not as a promise that
		// never settled. Running any JavaScript surfaces the interrupt.
		x.stopFor(x.ctx)
		if _, err := x.rt.RunProgram(interruptProbe()); err != nil {
			return nil, err
		}
	}
	return v, nil
}

var interruptProbe = embeddedProgram("interrupt-probe", "void 0")

// wakeLoop is called with x.mu held when the run is interrupted, so a run waiting in its loop
// stops waiting.
func (x *execution) wakeLoop() {
	if x.loop != nil {
		x.loop.signal()
	}
}

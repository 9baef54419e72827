package botapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultShutdownGrace is how long Shutdown lets bot runs finish before it stops them.
const DefaultShutdownGrace = 10 * time.Second

// stopWait bounds how long Shutdown waits, after stopping the runs, for them to record their
// end: a run in a worker is answered at once when cancelled; one stuck in a native call in
// process within a second (botrunner's abandon grace).
const stopWait = 5 * time.Second

// errShutdown is the cause a run is stopped with when the gateway shuts down.
var errShutdown = errors.New("the gateway is shutting down")

// lifecycle is how the API's runs end with it. A config reload (Close) lets every run go on
// to its own end — async runs keep their jobs and audit events, and nothing waits for them, so
// a reload is never held up by a bot. A shutdown (Shutdown) gives runs a grace period and then
// stops those still going: a synchronous caller is answered that the run was stopped, an async
// job is marked failed with the same reason, and neither is ever run again (a bot with side
// effects must not run twice for one request).
type lifecycle struct {
	grace time.Duration

	runs     sync.WaitGroup // runs in flight, synchronous and async
	active   atomic.Int64   // how many: Close ends at once when none is
	stop     context.Context
	stopRuns context.CancelCauseFunc

	// cancels are the runs in flight's, by their number (last), for
	// stopAll. A context.AfterFunc on stop per run did the same, at three
	// allocations and a registration in stop's own set per run.
	mu      sync.Mutex
	cancels map[uint64]context.CancelCauseFunc
	last    uint64

	closeOnce sync.Once
	done      chan struct{} // closed once the API has closed: its runs ended, audit flushed
}

func newLifecycle(grace time.Duration) *lifecycle {
	if grace <= 0 {
		grace = DefaultShutdownGrace
	}
	stop, stopRuns := context.WithCancelCause(context.Background())
	return &lifecycle{grace: grace, stop: stop, stopRuns: stopRuns, cancels: map[uint64]context.CancelCauseFunc{}, done: make(chan struct{})}
}

// begin counts a run in and returns its context: parent's, also cancelled (with errShutdown
// as its cause) when a shutdown stops the runs — at once if it has already. end must be
// called when the run is over.
func (l *lifecycle) begin(parent context.Context) (ctx context.Context, end func()) {
	l.runs.Add(1)
	l.active.Add(1)
	ctx, cancel := context.WithCancelCause(parent)
	l.mu.Lock()
	l.last++
	n := l.last
	stopped := l.stop.Err() != nil
	if !stopped {
		l.cancels[n] = cancel
	}
	l.mu.Unlock()
	if stopped {
		cancel(context.Cause(l.stop))
	}
	return ctx, func() {
		l.mu.Lock()
		delete(l.cancels, n)
		l.mu.Unlock()
		cancel(nil)
		l.active.Add(-1)
		l.runs.Done()
	}
}

// stopAll stops the runs in flight, and those that begin from now on, with cause.
func (l *lifecycle) stopAll(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopRuns(cause)
	for _, cancel := range l.cancels {
		cancel(cause)
	}
}

// stoppedByShutdown tells whether a run's context ended because the gateway shut down, and
// says so for the caller.
func (l *lifecycle) stoppedByShutdown(ctx context.Context) (string, bool) {
	if !errors.Is(context.Cause(ctx), errShutdown) {
		return "", false
	}
	return fmt.Sprintf("the gateway shut down while the bot ran: the run was stopped after a grace of %s and did not complete; it will not be run again", l.grace), true
}

// Close is for a config reload (or the end of `caddy validate`): runs go on to their end,
// then the audit writer is flushed and closed. It returns at once; with no run going, the API
// is closed (Done) when it returns, so a process about to exit loses nothing.
func (a *API) Close() {
	if a.life.active.Load() == 0 {
		a.closeNow()
		return
	}
	go a.closeWhenIdle()
}

// Shutdown is for the process's exit: it waits for runs up to the grace, stops those still
// going, waits (boundedly) for them to record how they ended, and flushes the audit events.
// It returns when that is done, within the grace plus a few seconds. Calling it again, or
// after Close, waits for the same end.
func (a *API) Shutdown() {
	idle := make(chan struct{})
	go func() {
		a.life.runs.Wait()
		close(idle)
	}()
	select {
	case <-idle:
	case <-time.After(a.life.grace):
		a.life.stopAll(errShutdown)
		select {
		case <-idle:
		case <-time.After(stopWait):
			a.o.Logger.Warn("bot runs did not end after being stopped for shutdown")
		}
	}
	a.closeNow()
}

// Done is closed once the API has closed (Close's runs ended, or Shutdown returned).
func (a *API) Done() <-chan struct{} { return a.life.done }

func (a *API) closeWhenIdle() {
	a.life.runs.Wait()
	a.closeNow()
}

func (a *API) closeNow() {
	a.life.closeOnce.Do(func() {
		a.audit.close()
		close(a.life.done)
	})
	<-a.life.done
}

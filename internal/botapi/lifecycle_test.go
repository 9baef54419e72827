package botapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// newLifecycleAPI is an API on a real Badger store with a short shutdown grace.
func newLifecycleAPI(t *testing.T, grace time.Duration) *API {
	t.Helper()
	a, err := New(Options{Store: storetest.Open(t), Runner: botrunner.New(botrunner.Options{}), Compiler: newCompiler(t), ShutdownGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestReloadDoesNotWaitForRuns: Close (a config reload) returns at once while a run goes
// on, and the API is done only when the run ends; the run is not stopped.
func TestReloadDoesNotWaitForRuns(t *testing.T) {
	a := newLifecycleAPI(t, time.Hour)
	ctx, end := a.life.begin(context.Background())
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a run")
	}
	select {
	case <-a.Done():
		t.Fatal("the API closed while a run was still going")
	case <-time.After(50 * time.Millisecond):
	}
	if ctx.Err() != nil {
		t.Fatalf("a reload stopped a run: %v", context.Cause(ctx))
	}
	end()
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the API did not close after its last run ended")
	}
}

// TestShutdownStopsRunsAfterTheGrace: runs that end within the grace are not touched; a run
// still going at the end of the grace is stopped with a cause that says why, and Shutdown
// returns soon after.
func TestShutdownStopsRunsAfterTheGrace(t *testing.T) {
	const grace = 200 * time.Millisecond
	a := newLifecycleAPI(t, grace)
	quick, endQuick := a.life.begin(context.Background())
	slow, endSlow := a.life.begin(context.Background())
	go func() {
		time.Sleep(grace / 4)
		endQuick()
	}()
	go func() {
		<-slow.Done()
		endSlow()
	}()
	start := time.Now()
	a.Shutdown()
	took := time.Since(start)
	if took < grace {
		t.Errorf("Shutdown returned after %v, before the %v grace", took, grace)
	}
	if took > grace+stopWait {
		t.Errorf("Shutdown took %v; the bound is the grace plus %v", took, stopWait)
	}
	if why, stopped := a.life.stoppedByShutdown(slow); !stopped || !strings.Contains(why, "will not be run again") {
		t.Errorf("the slow run: stopped %v, %q", stopped, why)
	}
	if _, stopped := a.life.stoppedByShutdown(quick); stopped {
		t.Error("a run that ended within the grace counts as stopped by the shutdown")
	}
	select {
	case <-a.Done():
	default:
		t.Error("the API is not done after Shutdown")
	}
}

// TestShutdownOfAnIdleAPIIsImmediate: nothing running, nothing to wait for.
func TestShutdownOfAnIdleAPIIsImmediate(t *testing.T) {
	a := newLifecycleAPI(t, time.Hour)
	done := make(chan struct{})
	go func() { a.Shutdown(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown of an idle API waited")
	}
	a.Shutdown() // again: returns, no panic
}

// TestCancelledRunIsNotAShutdown: a caller that goes away is not reported as a shutdown.
func TestCancelledRunIsNotAShutdown(t *testing.T) {
	a := newLifecycleAPI(t, time.Hour)
	parent, cancel := context.WithCancel(context.Background())
	ctx, end := a.life.begin(parent)
	defer end()
	cancel()
	if _, stopped := a.life.stoppedByShutdown(ctx); stopped || !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("a cancelled caller: stopped by shutdown %v, err %v", stopped, ctx.Err())
	}
}

// TestBodyMemoryReleasesAfterABurst: memory is returned once a burst of large bodies has
// drained, not while bodies are held, and not after small ones.
func TestBodyMemoryReleasesAfterABurst(t *testing.T) {
	m := newBodyMemory()
	freed := make(chan struct{}, 4)
	m.free = func() { freed <- struct{}{} }
	small := m.hold(1 << 10)
	small()
	big := m.hold(releaseAfterBytes / 2)
	other := m.hold(releaseAfterBytes / 2)
	big()
	select {
	case <-freed:
		t.Fatal("memory released while a body was still held")
	case <-time.After(50 * time.Millisecond):
	}
	other()
	other() // a second release of the same body counts once
	select {
	case <-freed:
	case <-time.After(5 * time.Second):
		t.Fatal("memory not released after a drained burst")
	}
	m.mu.Lock()
	held := m.held
	m.mu.Unlock()
	if held != 0 {
		t.Errorf("held = %d after every body was released", held)
	}
}

// TestReadBodyAllocatesOnce: with a truthful Content-Length the body is read into one
// allocation of its size; without one, or with a lying one, it is still read whole.
func TestReadBodyAllocatesOnce(t *testing.T) {
	body := strings.Repeat("x", 100_000)
	got, err := readBody(strings.NewReader(body), int64(len(body)), 1<<20)
	if err != nil || string(got) != body || cap(got) != len(body)+1 {
		t.Fatalf("readBody = %d bytes (cap %d), %v", len(got), cap(got), err)
	}
	for _, claimed := range []int64{-1, 10, int64(len(body)) + 5} {
		got, err := readBody(strings.NewReader(body), claimed, 1<<20)
		if err != nil || string(got) != body {
			t.Errorf("Content-Length %d: %d bytes, %v", claimed, len(got), err)
		}
	}
	if got, _ := readBody(strings.NewReader(body), int64(len(body)), 1000); len(got) != 1001 {
		t.Errorf("over the limit: read %d bytes, want limit+1", len(got))
	}
}

// TestStoppingRunsCancelsThoseInFlightAndToCome checks the lifecycle's
// own bookkeeping: a run in flight when the runs are stopped ends with
// errShutdown as its cause, one that begins afterwards is cancelled at
// once with it, a run whose caller went away has the caller's cause, and
// an ended run is forgotten.
func TestStoppingRunsCancelsThoseInFlightAndToCome(t *testing.T) {
	l := newLifecycle(time.Second)
	parent, cancelParent := context.WithCancelCause(context.Background())
	gone := errors.New("the caller went away")
	left, endLeft := l.begin(parent)
	cancelParent(gone)
	if !errors.Is(context.Cause(left), gone) {
		t.Fatalf("a run whose caller left: cause %v", context.Cause(left))
	}
	endLeft()
	running, endRunning := l.begin(context.Background())
	if running.Err() != nil {
		t.Fatal("a run is cancelled before any stop")
	}
	l.stopAll(errShutdown)
	if !errors.Is(context.Cause(running), errShutdown) {
		t.Fatalf("a run in flight: cause %v, want errShutdown", context.Cause(running))
	}
	endRunning()
	late, endLate := l.begin(context.Background())
	if !errors.Is(context.Cause(late), errShutdown) {
		t.Fatalf("a run begun after the stop: cause %v, want errShutdown", context.Cause(late))
	}
	endLate()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.cancels) != 0 || l.active.Load() != 0 {
		t.Fatalf("%d runs still registered, %d active", len(l.cancels), l.active.Load())
	}
}

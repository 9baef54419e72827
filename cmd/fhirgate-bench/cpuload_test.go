package main

import (
	"runtime"
	"testing"
	"time"
)

// TestSpinUsesTheCPUAskedFor checks spin against the thread's own CPU
// clock: it must not return before the thread has used d, whatever the
// machine's load (wall time is not what it measures).
func TestSpinUsesTheCPUAskedFor(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const d = 3 * time.Millisecond
	before := threadCPU()
	spin(d)
	if used := threadCPU() - before; used < d {
		t.Fatalf("spin(%s) used %s of CPU", d, used)
	}
}

// TestCPULoadStops checks that a started load spends CPU in this process
// and that stop ends it: the process's CPU stops growing by the load's
// share once stop returns.
func TestCPULoadStops(t *testing.T) {
	before := processCPU(t)
	stop := startCPULoad(4*time.Millisecond, 100)
	time.Sleep(300 * time.Millisecond)
	stop()
	spent := processCPU(t) - before
	// 30 ticks of 4 ms would be 120 ms; a loaded machine may run fewer ticks.
	if spent < 20*time.Millisecond {
		t.Fatalf("the load spent %s of CPU in 300 ms at 4 ms per tick, 100 ticks a second", spent)
	}
	after := processCPU(t)
	time.Sleep(200 * time.Millisecond)
	if idle := processCPU(t) - after; idle >= 100*time.Millisecond {
		t.Fatalf("the process spent %s of CPU in the 200 ms after stop", idle)
	}
}

// processCPU is ownCPU, failing t on an error.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	d, err := ownCPU()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

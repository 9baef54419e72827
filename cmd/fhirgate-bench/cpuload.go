package main

import (
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// cpuLoadThreads is how many threads share a tick of startCPULoad's work:
// a write's deliveries keep the gateway's two Ps and its bot workers busy
// at once, not one CPU after the other.
const cpuLoadThreads = 2

// startCPULoad spends perTick of CPU time every 1/rate s in this process,
// split over cpuLoadThreads goroutines, each on its own OS thread, until
// the returned stop is called. Scenario 12's control runs it beside writes
// with no Subscription: the same CPU as the deliveries, spent outside the
// gateway. The ticks are not aligned with the writes, as the deliveries
// are (they start a few milliseconds after each write's answer).
func startCPULoad(perTick time.Duration, rate int) (stop func()) {
	each := perTick / cpuLoadThreads
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range cpuLoadThreads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Thread CPU time is only this goroutine's while it keeps its thread.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tick := time.NewTicker(time.Second / time.Duration(rate))
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
					spin(each)
				}
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// spin runs on the CPU until the calling thread has used d more of it.
func spin(d time.Duration) {
	end := threadCPU() + d
	x := uint64(1)
	for threadCPU() < end {
		for i := range 256 {
			x = x*6364136223846793005 + uint64(i)
		}
	}
	spinSink = x
}

// spinSink keeps spin's arithmetic from being optimized away.
var spinSink uint64

// threadCPU is the CPU time the calling OS thread has used.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic("clock_gettime(CLOCK_THREAD_CPUTIME_ID): " + err.Error())
	}
	return time.Duration(ts.Nano())
}

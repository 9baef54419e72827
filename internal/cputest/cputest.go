// Package cputest measures the CPU time a benchmark's process spends, for
// benchmarks that report CPU per operation beside wall time: the work of
// background goroutines (a store's flushes and compactions, an audit
// writer, a queue's workers) counts, which the benchmark's timer does not
// separate from waiting.
package cputest

import (
	"syscall"
	"testing"
	"time"
)

// Process is the CPU time, user and system, this process has used so far.
func Process(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

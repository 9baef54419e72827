package botrunner

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// heapCheckInterval is how often the heap watchdog looks at the heap while bots run. Reading
// the metric costs about a microsecond and stops nothing.
const heapCheckInterval = 5 * time.Millisecond

// liveHeapMetric is the heap the last garbage collection found reachable. Unlike the heap's
// current size it does not count garbage, so a gateway whose heap merely has not been collected
// yet is not mistaken for one that holds too much. A bot that keeps allocating makes the
// collector run ever more often as the heap nears GOMEMLIMIT, so the figure stays fresh exactly
// when it matters.
const liveHeapMetric = "/gc/heap/live:bytes"

// heapWatch interrupts every registered run while the live heap is over limit. Its goroutine
// runs only while runs are registered, so an idle runner costs nothing and needs no Close.
type heapWatch struct {
	limit   uint64
	message string // the interrupted runs' error message

	mu       sync.Mutex
	runs     map[*execution]struct{}
	watching bool // the goroutine is running
}

func newHeapWatch(limit uint64, message string) *heapWatch {
	return &heapWatch{limit: limit, message: message, runs: map[*execution]struct{}{}}
}

// defaultMaxHeap is 90% of the Go memory limit when one is set, else 0 (off).
func defaultMaxHeap() int64 {
	limit := debug.SetMemoryLimit(-1) // a negative value reads the limit without changing it
	if limit <= 0 || limit == math.MaxInt64 {
		return -1
	}
	return limit / 10 * 9
}

func (w *heapWatch) add(x *execution) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runs[x] = struct{}{}
	if !w.watching {
		w.watching = true
		go w.watch()
	}
}

func (w *heapWatch) remove(x *execution) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.runs, x)
}

// watch checks the heap until no run is left. After stopping runs it waits for them to end and
// collects garbage before judging again: until then the live figure still counts what the
// stopped runs held, and would stop the next runs for nothing.
func (w *heapWatch) watch() {
	sample := []metrics.Sample{{Name: liveHeapMetric}}
	var stopped []*execution // stopped by the last trip; only this goroutine touches it
	tick := time.NewTicker(heapCheckInterval)
	defer tick.Stop()
	for range tick.C {
		w.mu.Lock()
		if len(w.runs) == 0 {
			w.watching = false
			w.mu.Unlock()
			return
		}
		ending := false
		for _, x := range stopped {
			if _, ok := w.runs[x]; ok {
				ending = true
				break
			}
		}
		w.mu.Unlock()
		if ending {
			continue
		}
		if stopped != nil {
			stopped = nil
			runtime.GC()
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 || sample[0].Value.Uint64() <= w.limit {
			continue
		}
		w.mu.Lock()
		for x := range w.runs {
			x.stop(stopMemory)
			stopped = append(stopped, x)
		}
		w.mu.Unlock()
	}
}

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

// Heap metrics the watchdog reads besides liveHeapMetric.
const (
	heapObjectsMetric = "/memory/classes/heap/objects:bytes" // live and not yet swept objects
	gcCyclesMetric    = "/gc/cycles/total:gc-cycles"
)

// forcedGCInterval spaces the collections the watchdog forces. The live figure is only as fresh
// as the last collection, and far below GOMEMLIMIT the runtime collects when the heap has
// doubled, so a bot could hold nearly twice its budget before a collection notices; when the
// heap's objects pass the limit (or the live figure does, which may be stale) the watchdog
// collects itself, at most this often, and judges by the fresh figure.
const forcedGCInterval = 50 * time.Millisecond

// heapWatch interrupts every registered run while the live heap is over limit. Its goroutine
// runs only while runs are registered, so an idle runner costs nothing and needs no Close.
type heapWatch struct {
	max     uint64 // absolute limit; 0: none
	budget  uint64 // what runs may add to the idle heap; 0: none
	message string // the interrupted runs' error message

	mu       sync.Mutex
	runs     map[*execution]struct{}
	watching bool   // the goroutine is running
	baseline uint64 // the live heap while no run was registered
	idleAt   uint64 // GC cycles completed when the last run ended

	// warm reports whether warm instances are kept: their module state is the bots' memory,
	// not the gateway's, so a baseline sampled while they exist may only go down. Nil: none.
	warm func() bool
	// tripped runs when the watchdog stops runs: it discards the idle warm instances, whose
	// memory counts against the budget too. Nil: nothing.
	tripped func()
}

func newHeapWatch(maxHeap, budget uint64, message string) *heapWatch {
	w := &heapWatch{max: maxHeap, budget: budget, message: message, runs: map[*execution]struct{}{}}
	live, objects, _ := readHeap()
	w.baseline = live
	if live == 0 { // no collection yet
		w.baseline = objects
	}
	return w
}

// readHeap reads the live heap, the heap's objects and the completed GC cycles.
func readHeap() (live, objects, cycles uint64) {
	s := []metrics.Sample{{Name: liveHeapMetric}, {Name: heapObjectsMetric}, {Name: gcCyclesMetric}}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	return v(0), v(1), v(2)
}

// readGCCycles reads only the count of completed collections. It is what every run's end
// needs, and unlike the heap's figures it does not make the runtime sum the heap statistics of
// every P (readHeap was some 6% of a trivial in-process run, at its start and end).
func readGCCycles() uint64 {
	s := [1]metrics.Sample{{Name: gcCyclesMetric}}
	metrics.Read(s[:])
	if s[0].Value.Kind() == metrics.KindUint64 {
		return s[0].Value.Uint64()
	}
	return 0
}

// limit is the heap the runs may reach; w.mu is held.
func (w *heapWatch) limit() uint64 {
	if w.budget == 0 {
		return w.max
	}
	l := w.baseline + w.budget
	if w.max > 0 && w.max < l {
		return w.max
	}
	return l
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
	if len(w.runs) == 0 && w.budget > 0 { // without a budget the baseline is not used
		// The live figure is the gateway's own only if the collection that measured it started
		// after the last run ended (two completed cycles since then); otherwise it may still
		// count what that run held, and a bot could grow its successor's budget.
		if live, _, cycles := readHeap(); cycles >= w.idleAt+2 && live > 0 && (w.warm == nil || !w.warm() || live < w.baseline) {
			w.baseline = live
		}
	}
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
	if len(w.runs) == 0 && w.budget > 0 {
		w.idleAt = readGCCycles()
	}
}

// watch checks the heap until no run is left. After stopping runs it waits for them to end and
// collects garbage before judging again: until then the live figure still counts what the
// stopped runs held, and would stop the next runs for nothing.
func (w *heapWatch) watch() {
	var stopped []*execution // stopped by the last trip; only this goroutine touches it
	var lastGC time.Time     // of the last forced collection
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
		limit := w.limit()
		w.mu.Unlock()
		if ending {
			continue
		}
		if stopped != nil {
			stopped = nil
			runtime.GC()
		}
		live, objects, _ := readHeap()
		if (live > limit || objects > limit && w.budget > 0) && time.Since(lastGC) >= forcedGCInterval {
			// Judge by a fresh collection: the live figure may still count what runs that have
			// ended held (the last collection ran before they did), and runs that are not
			// over must not be stopped for them.
			runtime.GC()
			lastGC = time.Now()
			live, _, _ = readHeap()
		}
		if live <= limit {
			continue
		}
		w.mu.Lock()
		for x := range w.runs {
			x.stop(stopMemory)
			stopped = append(stopped, x)
		}
		w.mu.Unlock()
		if w.tripped != nil {
			w.tripped()
		}
	}
}

package botrunner

import (
	"fmt"
	"testing"
	"time"
)

// TestPoolSharedWorkerResultsReachTheirRunsInAnyOrder: the runs sharing a worker read its
// frames in turn (leadFor). Whether the run reading gets its result first, and must hand the
// reading on, or last, after handing on the others' results, every run gets its own result and
// none is left waiting for a frame nobody reads (it would end killed at its deadline).
func TestPoolSharedWorkerResultsReachTheirRunsInAnyOrder(t *testing.T) {
	// Each run waits in a medplum call until released, then for input.ms, then answers n.
	prog := mustCompile(t, "index.ts", `export async function handler(medplum: any, event: any) {
  await medplum.readResource('Patient', '1');
  await new Promise((resolve) => setTimeout(resolve, event.input.ms));
  return { n: event.input.n };
}`)
	for _, tc := range []struct {
		name string
		ms   []int // by start order; the first run started is the first to read
	}{
		{"first started ends first", []int{0, 40, 80, 120}},
		{"first started ends last", []int{120, 80, 40, 0}},
		{"together", []int{0, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newSharingPool(t, PoolOptions{RunsPerWorker: len(tc.ms), Options: Options{MaxConcurrent: len(tc.ms)}})
			client := newBlockingClient()
			var results []<-chan *Result
			for i, ms := range tc.ms {
				ev := jsonEvent(t, fmt.Sprintf(`{"n":%d,"ms":%d}`, i, ms))
				results = append(results, startRun(t, p, Request{BotID: "a", CacheKey: "a", Code: prog.JS, Event: ev, Medplum: client, Timeout: 10 * time.Second}))
				<-client.entered
			}
			if got := p.spawns.Load(); got != 1 {
				t.Fatalf("%d workers started, want the %d runs on one", got, len(tc.ms))
			}
			releaseBlocked(t, client, results)
			// A result left unread until the worker is killed at its run's deadline still
			// arrives (reap reads it), but the worker is then gone.
			if idle, busy := poolCounts(p); idle != 1 || busy != 0 {
				t.Errorf("after the runs: %d idle and %d busy workers, want the one worker idle", idle, busy)
			}
		})
	}
}

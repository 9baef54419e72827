package botrunner

import (
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// liveHeap is the live heap after a fresh collection.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: liveHeapMetric}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestHeapWatchdogStopsAMemoryBomb(t *testing.T) {
	limit := int64(liveHeap()) + 64<<20
	r := New(Options{MaxHeapBytes: limit})
	bomb := mustCompile(t, "index.ts", `export function handler() { console.log('allocating'); const a: string[] = []; for (;;) a.push('x'.repeat(1 << 20) + a.length) }`)
	start := time.Now()
	res, err := r.Run(ctxT(t), Request{Code: bomb.JS, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped after %v", time.Since(start))
	if res.Outcome != OutcomeError || !strings.HasPrefix(res.Message, "bot execution stopped: memory limit exceeded") || res.Console != "allocating\n" {
		t.Errorf("result = %v %q console %q", res.Outcome, res.Message, res.Console)
	}
	assertOutcomeBody(t, res)
	if res := run(t, r, `export const handler = () => 'fine'`, jsonEvent(t, `{}`)); res.Outcome != OutcomeSuccess {
		t.Errorf("next run: %v %s", res.Outcome, res.Message)
	}
}

package riverqueue_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/cputest"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/riverqueue/riverqueuetest"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// benchRate is the subscribed writes per second of cmd/fhirgate-bench's
// scenario 12, each enqueuing one trigger.
const benchRate = 200

// BenchmarkDeferredEnqueue measures what a subscribed write waits for on
// PostgreSQL: its trigger's Deferred Enqueue, issued open loop at
// benchRate per second. In "working", the same queue works the triggers
// meanwhile (each reads and writes the store in a durable commit, as a
// trigger's bots do) on the store's pool; in "idle", nothing works them.
// It reports the Enqueue's p50, p99 and maximum, and the process's CPU
// per Enqueue (the worker's included). b.N is the number of Enqueues: run
// it with -benchtime=2000x or so, a 10 s window.
func BenchmarkDeferredEnqueue(b *testing.B) {
	b.Run("working", func(b *testing.B) { benchmarkDeferredEnqueue(b, true) })
	b.Run("idle", func(b *testing.B) { benchmarkDeferredEnqueue(b, false) })
}

func benchmarkDeferredEnqueue(b *testing.B, working bool) {
	ctx := context.Background()
	kv, q := riverqueuetest.Open(b, pgkvtest.DSN(b), queue.Options{})
	var worked sync.WaitGroup
	if working {
		worked.Add(b.N)
	}
	work := func(ctx context.Context, d *queue.Delivery) error {
		defer worked.Done()
		return kv.Update(ctx, func(tx store.Txn) error {
			key := []byte("bench/" + d.ID)
			if _, err := tx.Get(key); err != nil && err != store.ErrNotFound {
				return err
			}
			return tx.Set(key, d.Args, 0)
		})
	}
	if err := q.Register("bench.trigger", work, queue.KindOptions{}); err != nil {
		b.Fatal(err)
	}
	if working {
		if err := q.Start(ctx); err != nil {
			b.Fatal(err)
		}
	}
	payload, _ := json.Marshal(map[string]any{"resource": "Patient/1", "subscriptions": []string{"s1", "s2", "s3", "s4", "s5"}})
	waits := make([]time.Duration, b.N)
	errs := make(chan error, b.N)
	var enqueued sync.WaitGroup
	tick := time.NewTicker(time.Second / benchRate)
	defer tick.Stop()
	cpu0 := cputest.Process(b)
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		enqueued.Add(1)
		go func() {
			defer enqueued.Done()
			start := time.Now()
			_, err := q.Enqueue(ctx, queue.Job{Kind: "bench.trigger", Args: payload, Deferred: true})
			waits[i] = time.Since(start)
			if err != nil {
				errs <- err
			}
		}()
	}
	enqueued.Wait()
	worked.Wait()
	b.StopTimer()
	cpu := cputest.Process(b) - cpu0
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	slices.Sort(waits)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(waits[len(waits)/2]), "p50-ms")
	b.ReportMetric(ms(waits[len(waits)*99/100]), "p99-ms")
	b.ReportMetric(ms(waits[len(waits)-1]), "max-ms")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

package kvqueue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/kvqueue"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
)

// TestGroupedWrites: concurrent Enqueues (grouped into shared
// transactions), an EnqueueBatch with a key it repeats and one already
// taken, and a failing write in a group each end as if written alone, and
// every job runs once.
func TestGroupedWrites(t *testing.T) {
	db, err := badgerkv.Open(badgerkv.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := kvqueue.New(db, queue.Options{PollInterval: 20 * time.Millisecond}, nil)
	var mu sync.Mutex
	ran := map[string]int{}
	all := make(chan struct{})
	const want = 200 + 3
	if err := q.Register("g", func(_ context.Context, d *queue.Delivery) error {
		var s string
		_ = json.Unmarshal(d.Args, &s)
		mu.Lock()
		defer mu.Unlock()
		ran[s]++
		if len(ran) == want {
			close(all)
		}
		return nil
	}, queue.KindOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer q.Stop(ctx)

	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 200 {
		wg.Go(func() {
			if _, err := q.Enqueue(ctx, queue.Job{Kind: "g", Args: json.RawMessage(fmt.Sprintf(`"e%d"`, i))}); err != nil {
				errs <- err
			}
			// Invalid (no kind): fails alone, not its group.
			if _, err := q.Enqueue(ctx, queue.Job{Args: json.RawMessage(`"x"`)}); err == nil {
				errs <- fmt.Errorf("a job without a kind was enqueued")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := q.Enqueue(ctx, queue.Job{Kind: "g", Args: json.RawMessage(`"b0"`), UniqueKey: "taken"}); err != nil {
		t.Fatal(err)
	}
	batch := []queue.Job{
		{Kind: "g", Args: json.RawMessage(`"b1"`), UniqueKey: "k1"},
		{Kind: "g", Args: json.RawMessage(`"b1-again"`), UniqueKey: "k1"},
		{Kind: "g", Args: json.RawMessage(`"b2"`), UniqueKey: "k2"},
		{Kind: "g", Args: json.RawMessage(`"b0-again"`), UniqueKey: "taken"},
	}
	if err := q.EnqueueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	select {
	case <-all:
	case <-time.After(30 * time.Second):
	}
	time.Sleep(100 * time.Millisecond) // no late extra run
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != want || ran["b1-again"] != 0 || ran["b0-again"] != 0 || ran["b1"] != 1 || ran["b2"] != 1 || ran["e199"] != 1 {
		t.Fatalf("ran %d distinct jobs, want %d; %v", len(ran), want, ran)
	}
	for s, n := range ran {
		if n != 1 {
			t.Errorf("%s ran %d times", s, n)
		}
	}
}

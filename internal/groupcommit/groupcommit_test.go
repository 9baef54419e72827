package groupcommit

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestGroupHandsEachItsOutcome: concurrent items are committed in
// batches no larger than the maximum, every item exactly once, and each
// caller gets its own item's outcome.
func TestGroupHandsEachItsOutcome(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	largest := 0
	g := New(8, func(batch []int) []error {
		mu.Lock()
		defer mu.Unlock()
		largest = max(largest, len(batch))
		errs := make([]error, len(batch))
		for i, n := range batch {
			seen[n]++
			if n%7 == 0 {
				errs[i] = errors.New("multiple of 7")
			}
		}
		return errs
	})
	var wg sync.WaitGroup
	for n := range 500 {
		wg.Go(func() {
			err := g.Do(context.Background(), n)
			if (err != nil) != (n%7 == 0) {
				t.Errorf("item %d: outcome %v", n, err)
			}
		})
	}
	wg.Wait()
	if len(seen) != 500 || largest > 8 || largest < 1 {
		t.Fatalf("%d items committed, largest batch %d", len(seen), largest)
	}
	for n, c := range seen {
		if c != 1 {
			t.Errorf("item %d committed %d times", n, c)
		}
	}
}

// TestGroupLeavesOutEndedContexts: an item whose context ended is not
// committed, and gets the context's error.
func TestGroupLeavesOutEndedContexts(t *testing.T) {
	committed := 0
	g := New(8, func(batch []int) []error {
		committed += len(batch)
		return make([]error, len(batch))
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Do(ctx, 1); !errors.Is(err, context.Canceled) || committed != 0 {
		t.Fatalf("Do with an ended context: %v, %d committed", err, committed)
	}
	if err := g.Do(context.Background(), 2); err != nil || committed != 1 {
		t.Fatalf("Do: %v, %d committed", err, committed)
	}
}

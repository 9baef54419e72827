package botrunner

import (
	"context"
	"fmt"
	"sync"
)

// callTable matches the gateway's answers to a worker run's calls waiting for them: a bot's
// medplum calls (answer frames) and its fetches (fetched frames) each have one per run. Calls
// are numbered per table; a call gets at most one answer, and an answer for a call that is no
// longer waiting (its run's context ended first) is dropped. The map is made on the first call,
// so a run that makes none allocates nothing here.
type callTable[T any] struct {
	mu    sync.Mutex
	calls map[uint64]chan T
	next  uint64
}

// call numbers a new call, sends it with send and waits for its answer or the end of ctx.
// A failed send is the pool gone; it is returned wrapped.
func (t *callTable[T]) call(ctx context.Context, send func(call uint64) error) (T, error) {
	ch := make(chan T, 1)
	t.mu.Lock()
	if t.calls == nil {
		t.calls = map[uint64]chan T{}
	}
	t.next++
	id := t.next
	t.calls[id] = ch
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.calls, id)
		t.mu.Unlock()
	}()
	var zero T
	if err := send(id); err != nil {
		return zero, fmt.Errorf("asking the gateway: %w", err)
	}
	select {
	case a := <-ch:
		return a, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// deliver hands a to the call numbered id, if it is still waiting.
func (t *callTable[T]) deliver(id uint64, a T) {
	t.mu.Lock()
	ch := t.calls[id]
	t.mu.Unlock()
	if ch != nil {
		ch <- a // buffered; a call gets one answer
	}
}

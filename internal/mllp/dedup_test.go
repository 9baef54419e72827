package mllp

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestDuplicatesAnswerTheSameWithoutProcessing(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	d := NewDuplicates(time.Minute, 100, c.now)
	runs := 0
	process := func() ([]byte, bool) { runs++; return []byte(fmt.Sprint("ack", runs)), true }
	a1, dup1 := d.Do("k", process)
	a2, dup2 := d.Do("k", process)
	if string(a1) != "ack1" || string(a2) != "ack1" || dup1 || !dup2 || runs != 1 {
		t.Fatalf("got %s %v, %s %v, runs %d", a1, dup1, a2, dup2, runs)
	}
	if a, dup := d.Do("other", process); string(a) != "ack2" || dup {
		t.Fatalf("another key: %s %v", a, dup)
	}
	c.add(time.Minute + time.Second)
	if a, dup := d.Do("k", process); string(a) != "ack3" || dup {
		t.Fatalf("after the window: %s %v", a, dup)
	}
}

func TestDuplicatesNotKeptAreProcessedAgain(t *testing.T) {
	d := NewDuplicates(time.Minute, 100, nil)
	runs := 0
	busy := func() ([]byte, bool) { runs++; return []byte("busy"), false }
	d.Do("k", busy)
	if _, dup := d.Do("k", busy); dup || runs != 2 {
		t.Fatalf("a refusal was remembered: dup %v runs %d", dup, runs)
	}
}

func TestDuplicatesConcurrentCopyWaitsForTheFirst(t *testing.T) {
	d := NewDuplicates(time.Minute, 100, nil)
	var runs atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	go d.Do("k", func() ([]byte, bool) { runs.Add(1); close(started); <-release; return []byte("first"), true })
	<-started
	done := make(chan []byte)
	go func() {
		a, _ := d.Do("k", func() ([]byte, bool) { runs.Add(1); return []byte("second"), true })
		done <- a
	}()
	select {
	case a := <-done:
		t.Fatalf("the copy did not wait: %s", a)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if a := <-done; string(a) != "first" || runs.Load() != 1 {
		t.Fatalf("got %s after %d runs", a, runs.Load())
	}
}

func TestDuplicatesBounded(t *testing.T) {
	d := NewDuplicates(time.Hour, 10, nil)
	for i := range 1000 {
		d.Do(fmt.Sprint(i), func() ([]byte, bool) { return []byte("a"), true })
		d.Do(fmt.Sprint("busy", i), func() ([]byte, bool) { return []byte("b"), false })
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.entries) > 10 || len(d.order) > 2*10+64 {
		t.Fatalf("%d entries, %d slots", len(d.entries), len(d.order))
	}
	if _, ok := d.entries["999"]; !ok {
		t.Fatal("the newest entry was evicted")
	}
}

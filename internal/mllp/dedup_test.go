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
	d := NewDuplicates(time.Minute, 100, 1<<20, c.now)
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
	d := NewDuplicates(time.Minute, 100, 1<<20, nil)
	runs := 0
	busy := func() ([]byte, bool) { runs++; return []byte("busy"), false }
	d.Do("k", busy)
	if _, dup := d.Do("k", busy); dup || runs != 2 {
		t.Fatalf("a refusal was remembered: dup %v runs %d", dup, runs)
	}
}

func TestDuplicatesConcurrentCopyWaitsForTheFirst(t *testing.T) {
	d := NewDuplicates(time.Minute, 100, 1<<20, nil)
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
	d := NewDuplicates(time.Hour, 10, 1<<20, nil)
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

// TestDuplicatesBoundedInBytes: large answers are remembered up to the
// byte bound, the oldest going first, the count of bytes follows every
// way an entry goes (evicted, expired, not kept), and an answer larger
// than the whole bound is answered but neither remembered nor allowed to
// evict the others.
func TestDuplicatesBoundedInBytes(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	const maxBytes = 64 << 10
	d := NewDuplicates(time.Minute, 1000, maxBytes, c.now)
	big := make([]byte, 10<<10)
	for i := range 100 {
		if _, dup := d.Do(fmt.Sprint(i), func() ([]byte, bool) { return big, true }); dup {
			t.Fatalf("message %d answered as a duplicate", i)
		}
	}
	d.mu.Lock()
	entries, bytes := len(d.entries), d.bytes
	_, newest := d.entries["99"]
	_, oldest := d.entries["0"]
	d.mu.Unlock()
	if bytes > maxBytes || entries == 0 || entries > maxBytes/len(big) || !newest || oldest {
		t.Fatalf("%d entries of %d bytes (newest kept %v, oldest kept %v); want at most %d bytes, the newest kept",
			entries, bytes, newest, oldest, maxBytes)
	}
	if _, dup := d.Do("99", func() ([]byte, bool) { t.Fatal("a remembered answer was processed again"); return nil, true }); !dup {
		t.Fatal("the newest answer is not remembered")
	}
	huge := make([]byte, maxBytes+1)
	runs := 0
	for range 2 {
		if a, dup := d.Do("huge", func() ([]byte, bool) { runs++; return huge, true }); dup || len(a) != len(huge) {
			t.Fatalf("an answer over the bound: %d bytes, duplicate %v", len(a), dup)
		}
	}
	if runs != 2 {
		t.Fatalf("an answer over the bound was remembered (%d runs for 2 copies)", runs)
	}
	if _, dup := d.Do("99", func() ([]byte, bool) { return nil, true }); !dup {
		t.Fatal("an answer over the bound evicted the others")
	}
	d.Do("refused", func() ([]byte, bool) { return big, false })
	c.add(2 * time.Minute)
	d.Do("after", func() ([]byte, bool) { return []byte("a"), true })
	d.mu.Lock()
	defer d.mu.Unlock()
	if want := len("after") + rememberedOverhead + 1; len(d.entries) != 1 || d.bytes != want {
		t.Fatalf("after the window: %d entries of %d bytes; want 1 of %d", len(d.entries), d.bytes, want)
	}
}

package kvqueue

import (
	"container/heap"
	"sync"
	"time"
)

// waitingIndex is the dispatcher's memory of the waiting jobs of
// registered kinds, by run time: a claim takes the due ones from it and
// only checks in its transaction that their waiting keys still exist (a
// point read each), instead of scanning the waiting keys. A scan walks
// past the deletion marks of every job claimed since Badger last
// compacted (about one per job run), so its cost grew with the jobs
// recently run — at 1,000 deliveries a second, most of a claim's CPU
// (BenchmarkDeliveryPath).
//
// The queue adds what it writes once committed (Enqueue, EnqueueBatch, a
// retry, a rescue), and the dispatcher's poll adds the due jobs it finds
// in the store and does not know (written by EnqueueTx in a caller's
// transaction, or by another queue on the same store). An entry whose
// waiting key is gone (Cancel, another queue's claim) is dropped by the
// claim that finds it gone.
type waitingIndex struct {
	mu    sync.Mutex
	h     entryHeap
	known map[string]struct{} // ids in h or taken by a claim in progress
}

// entry is one waiting job: its waiting key, run time and id, and its
// record as written while the index holds fewer than maxHeldRecords (the
// claim then decodes nothing; beyond, it reads the record from the
// store, so that a backlog costs the index about a hundred bytes a job,
// not its args).
type entry struct {
	key string
	at  time.Time
	id  string
	r   *record
}

// maxHeldRecords bounds the records the index holds.
const maxHeldRecords = 4096

func newWaitingIndex() *waitingIndex {
	return &waitingIndex{known: map[string]struct{}{}}
}

// add remembers a waiting job, unless it is known.
func (x *waitingIndex) add(e *entry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.known[e.id]; ok {
		return
	}
	x.known[e.id] = struct{}{}
	if len(x.h) >= maxHeldRecords {
		e.r = nil
	}
	heap.Push(&x.h, e)
}

// knows tells whether a job is in the index.
func (x *waitingIndex) knows(id string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.known[id]
	return ok
}

// takeDue takes up to n jobs due at now, earliest first. They stay known
// until the claim ends: put back if it failed, forgotten if it committed.
func (x *waitingIndex) takeDue(now time.Time, n int) []*entry {
	x.mu.Lock()
	defer x.mu.Unlock()
	var due []*entry
	for len(due) < n && len(x.h) > 0 && !x.h[0].at.After(now) {
		due = append(due, heap.Pop(&x.h).(*entry))
	}
	return due
}

// hasDue tells whether a job is due at now.
func (x *waitingIndex) hasDue(now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.h) > 0 && !x.h[0].at.After(now)
}

// putBack returns taken jobs (their claim failed).
func (x *waitingIndex) putBack(es []*entry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range es {
		heap.Push(&x.h, e)
	}
}

// forget ends taken jobs (claimed, or found gone).
func (x *waitingIndex) forget(es []*entry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range es {
		delete(x.known, e.id)
	}
}

// entryHeap orders entries by run time, then id (the waiting keys' order).
type entryHeap []*entry

func (h entryHeap) Len() int { return len(h) }
func (h entryHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].id < h[j].id
}
func (h entryHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *entryHeap) Push(x any)   { *h = append(*h, x.(*entry)) }
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

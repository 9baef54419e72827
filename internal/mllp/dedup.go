package mllp

import (
	"sync"
	"time"
)

// Duplicates remembers the acknowledgments of recent messages, so a sender
// that sends a message again (it did not see the ACK, and resends with the
// same MSH-10) gets the same answer without the message being processed
// twice. Entries live for a window, and both their number and the memory
// they hold are bounded: beyond either bound the oldest go first.
type Duplicates struct {
	window   time.Duration
	max      int
	maxBytes int
	now      func() time.Time

	mu      sync.Mutex
	entries map[string]*remembered
	order   []slot // entries in insertion order, oldest first
	bytes   int    // the cost of the entries in entries
}

// rememberedOverhead estimates what an entry holds beside its key and
// answer: its map entry, its slot in the order, the remembered struct and
// its channel.
const rememberedOverhead = 256

// slot is one place in the insertion order; it is stale once its key names
// another entry (or none).
type slot struct {
	key string
	e   *remembered
}

// remembered is one message's answer; done is closed once ack is known, so
// a duplicate that arrives while the first is processed waits for it.
type remembered struct {
	done chan struct{}
	ack  []byte
	keep bool
	at   time.Time
	cost int // counted in Duplicates.bytes
}

// NewDuplicates returns a memory of answers kept for window, at most max of
// them and maxBytes of keys, answers and bookkeeping (an answer larger than
// that is not remembered). now is the clock (nil: time.Now).
func NewDuplicates(window time.Duration, max, maxBytes int, now func() time.Time) *Duplicates {
	if now == nil {
		now = time.Now
	}
	return &Duplicates{window: window, max: max, maxBytes: maxBytes, now: now, entries: make(map[string]*remembered)}
}

// Do answers the message key names: the remembered answer when one is
// (waiting for it if the first copy is still being processed), else
// process's. process's answer is remembered only when keep is true (a
// message refused because the gateway was busy may be sent again and must
// then be processed). dup says the answer is a remembered one.
func (d *Duplicates) Do(key string, process func() (ack []byte, keep bool)) (ack []byte, dup bool) {
	for {
		d.mu.Lock()
		d.expire()
		e, ok := d.entries[key]
		if !ok {
			e = &remembered{done: make(chan struct{}), at: d.now(), cost: len(key) + rememberedOverhead}
			d.entries[key] = e
			d.bytes += e.cost
			d.order = append(d.order, slot{key, e})
			d.evict()
			d.mu.Unlock()
			ack, keep := process()
			d.mu.Lock()
			e.ack, e.keep = ack, keep
			present := d.entries[key] == e
			// An answer larger than the whole bound is not remembered,
			// rather than evicting every other answer to make room.
			remember := keep && e.cost+len(ack) <= d.maxBytes
			if present && remember {
				e.cost += len(ack)
				d.bytes += len(ack)
			}
			close(e.done)
			if present && !remember {
				d.remove(key, e)
				d.compact()
			}
			d.evict()
			d.mu.Unlock()
			return ack, false
		}
		d.mu.Unlock()
		<-e.done
		if e.keep {
			return e.ack, true
		}
		// The first copy was not kept (refused while busy): process this one.
	}
}

// expire drops entries older than the window, and stale slots; d.mu is
// held.
func (d *Duplicates) expire() {
	cut := d.now().Add(-d.window)
	for len(d.order) > 0 {
		s := d.order[0]
		if d.entries[s.key] == s.e {
			if s.e.at.After(cut) || !isDone(s.e) {
				return // young, or still being processed: it and all after it stay
			}
			d.remove(s.key, s.e)
		}
		d.order = d.order[1:]
	}
}

// evict drops the oldest finished entries while there are more than max
// or they hold more than maxBytes; d.mu is held.
func (d *Duplicates) evict() {
	for (len(d.entries) > d.max || d.bytes > d.maxBytes) && len(d.order) > 0 {
		s := d.order[0]
		if d.entries[s.key] == s.e {
			if !isDone(s.e) {
				return // the oldest is still being processed; it goes once finished
			}
			d.remove(s.key, s.e)
		}
		d.order = d.order[1:]
	}
}

// remove forgets key's entry e; d.mu is held.
func (d *Duplicates) remove(key string, e *remembered) {
	delete(d.entries, key)
	d.bytes -= e.cost
}

func isDone(e *remembered) bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// compact drops stale slots when they outnumber live entries, so answers
// that were not kept (a flood of busy refusals) cannot grow the order
// without bound; d.mu is held.
func (d *Duplicates) compact() {
	if len(d.order) <= 2*len(d.entries)+64 {
		return
	}
	live := d.order[:0]
	for _, s := range d.order {
		if d.entries[s.key] == s.e {
			live = append(live, s)
		}
	}
	clear(d.order[len(live):])
	d.order = live
}

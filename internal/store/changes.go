package store

import "sync/atomic"

// changeCounters counts the writes made through a Store, per resource type,
// so that callers can keep decoded records in memory and know when a copy
// may be stale (see [Store.Changes]).
//
// A counter moves after its write has been committed (or has failed, which
// costs only a needless refresh). A reader that takes the count before
// reading therefore either reads the new data or, if the write lands in
// between, holds a count that no longer matches and reads again next time.
type changeCounters map[string]*atomic.Uint64

func newChangeCounters() changeCounters {
	c := make(changeCounters, len(registry))
	for typ := range registry {
		c[typ] = new(atomic.Uint64)
	}
	return c
}

func (c changeCounters) note(resourceType string) {
	if n := c[resourceType]; n != nil {
		n.Add(1)
	}
}

// Changes returns a number that moves whenever a resource of one of the
// given types is created, replaced or deleted through this Store (or the
// store is reset with [Store.Invalidate]). Equal numbers before and after
// mean nothing of those types was written in between. It counts only this
// Store's writes: a cache built on it is right only while every write to
// the KV goes through this Store, as in a gateway, where one Store is shared
// per Badger directory (Badger locks the directory against other
// processes).
func (s *Store) Changes(resourceTypes ...string) uint64 {
	var sum uint64
	for _, t := range resourceTypes {
		if n := s.changes[t]; n != nil {
			sum += n.Load()
		}
	}
	return sum
}

// Invalidate moves every change counter, for when the KV's content was
// replaced under the Store (a restore from backup).
func (s *Store) Invalidate() {
	for _, n := range s.changes {
		n.Add(1)
	}
}

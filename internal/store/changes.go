package store

import (
	"context"
	"fmt"
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// recordBuckets is how many counters the per-record changes are hashed
// into (see [Store.RecordChanges]): two records sharing one only cost a
// needless refresh. 32 KiB per Store.
const recordBuckets = 4096

// changeCounters counts the writes made to the KV, per resource type and
// per record, so that callers can keep decoded records in memory and know
// when a copy may be stale (see [Store.Changes]). Writes made through this
// Store are counted as they end; writes made by other processes sharing
// the KV are counted when its [ChangeFeed] reports them.
//
// A counter moves after its write has been committed (or has failed, which
// costs only a needless refresh). A reader that takes the count before
// reading therefore either reads the new data or, if the write lands in
// between, holds a count that no longer matches and reads again next time.
type changeCounters struct {
	seed    maphash.Seed
	types   map[string]*typeCounters
	records [recordBuckets]atomic.Uint64
}

type typeCounters struct {
	any atomic.Uint64 // every change of the type
	all atomic.Uint64 // changes that may touch any record of the type
}

func newChangeCounters() *changeCounters {
	c := &changeCounters{seed: maphash.MakeSeed(), types: make(map[string]*typeCounters, len(registry))}
	for typ := range registry {
		c.types[typ] = new(typeCounters)
	}
	return c
}

func (c *changeCounters) bucket(resourceType, id string) *atomic.Uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(resourceType)
	h.WriteByte('/')
	h.WriteString(id)
	return &c.records[h.Sum64()%recordBuckets]
}

// note counts a change of one record.
func (c *changeCounters) note(resourceType, id string) {
	if t := c.types[resourceType]; t != nil {
		c.bucket(resourceType, id).Add(1)
		t.any.Add(1)
	}
}

// noteType counts a change that may have touched any record of the type.
func (c *changeCounters) noteType(resourceType string) {
	if t := c.types[resourceType]; t != nil {
		t.all.Add(1)
		t.any.Add(1)
	}
}

// Changes returns a number that moves whenever a resource of one of the
// given types is created, replaced or deleted, through this Store or (when
// the KV has a [ChangeFeed], as PostgreSQL's has) by another process
// sharing the KV, or when the store is reset with [Store.Invalidate].
// Equal numbers before and after mean nothing of those types was written
// in between. Other processes' creates of Login and AuditEvent records are
// not reported (see [quietCreates]): no cache holds a record before it
// exists.
func (s *Store) Changes(resourceTypes ...string) uint64 {
	var sum uint64
	for _, typ := range resourceTypes {
		if t := s.changes.types[typ]; t != nil {
			sum += t.any.Load()
		}
	}
	return sum
}

// RecordChanges is [Store.Changes] narrowed to one record: it moves when
// that record is written (or, rarely, another that shares its counter) and
// on every change reported for the whole type, but not on writes of other
// records of the type. A cache of single records, such as the sign-ins
// Authenticate reads, stays warm while others sign in.
func (s *Store) RecordChanges(resourceType, id string) uint64 {
	t := s.changes.types[resourceType]
	if t == nil {
		return 0
	}
	return t.all.Load() + s.changes.bucket(resourceType, id).Load()
}

// Invalidate moves every change counter, for when the KV's content was
// replaced under the Store (a restore from backup) or writes may have been
// missed (the change feed reconnected).
func (s *Store) Invalidate() {
	for typ := range s.changes.types {
		s.changes.noteType(typ)
	}
}

// InvalidateEverywhere is [Store.Invalidate] here and, through the KV's
// [ChangeFeed] if it has one, in every other process sharing the KV: for
// when records were replaced under every Store at once (a restore from
// backup).
func (s *Store) InvalidateEverywhere(ctx context.Context) error {
	s.Invalidate()
	if _, ok := s.kv.(ChangeFeed); !ok {
		return nil
	}
	err := s.kv.Update(ctx, func(tx Txn) error {
		if a, ok := tx.(Announcer); ok {
			a.Announce(AnnounceEverything)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("telling the other replicas that everything changed: %w", err)
	}
	return nil
}

// AnnounceEverything is the topic that stands for every record of every
// type.
const AnnounceEverything = "*"

// ChangeFeed is implemented by a KV that other processes write to at the
// same time (PostgreSQL's): it tells each process what the others'
// committed transactions changed, so that caches above the store notice
// another replica's writes. A Store subscribes to its KV's feed in [New];
// a KV without one (Badger, which one process owns) needs nothing.
type ChangeFeed interface {
	// Subscribe makes changed receive the topics that another process's
	// transaction announced (see [Announcer]), after it committed. A nil
	// slice means anything may have changed: the feed has (re)connected
	// and announcements may have been lost. changed runs on the feed's
	// goroutine and must be quick.
	Subscribe(changed func(topics []string))
}

// Announcer is implemented by the [Txn] of a KV with a [ChangeFeed]. A
// topic is "<Type>/<id>" for one record, "<Type>" for any record of the
// type, or [AnnounceEverything]; a KV that cannot carry every topic of a transaction may send each
// one's part before its first '/' instead, or nothing specific at all (a
// nil slice: everything). Announcements of a transaction that does not
// commit are dropped.
type Announcer interface {
	Announce(topic string)
}

// quietCreates are the types whose creation is not announced to other
// processes: records created by the thousand (a Login per sign-in, an
// AuditEvent per request) that no process can have cached before they
// exist. Their replacement and deletion are announced.
var quietCreates = map[string]bool{"Login": true, "AuditEvent": true}

// announce tells other processes sharing the KV, if it has a feed, that
// the transaction changes the record.
func announce(tx Txn, resourceType, id string, created bool) {
	if a, ok := tx.(Announcer); ok && !(created && quietCreates[resourceType]) {
		a.Announce(resourceType + "/" + id)
	}
}

// remoteChanges counts what another process's transactions changed.
func (s *Store) remoteChanges(topics []string) {
	if topics == nil {
		s.Invalidate()
		return
	}
	for _, topic := range topics {
		if topic == AnnounceEverything {
			s.Invalidate()
			continue
		}
		if typ, id, ok := strings.Cut(topic, "/"); ok {
			s.changes.note(typ, id)
		} else {
			s.changes.noteType(typ)
		}
	}
}

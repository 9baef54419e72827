package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/fhirgate/fhirgate/internal/groupcommit"
)

// Options configures a [Store]. The zero value is ready to use.
type Options struct {
	// Now returns the current time for meta.lastUpdated; nil means
	// time.Now. (TTL expiry always follows the KV's real clock.)
	Now func() time.Time
}

// Store keeps typed resources on a [KV]. It is safe for concurrent use;
// several gateways may share one KV.
type Store struct {
	kv      KV
	now     func() time.Time
	group   *groupcommit.Group[*groupedWrite]
	changes *changeCounters
	usage   usageCache
	// usageBucket is the width of a bot-record usage bucket (usage.go);
	// tests shorten it.
	usageBucket time.Duration
	// shared is set when other processes write kv too (SharedKV).
	shared bool
}

// New returns a Store on kv.
func New(kv KV, o Options) *Store {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	s := &Store{kv: kv, now: now, changes: newChangeCounters(), usageBucket: defaultUsageBucket, shared: sharedByProcesses(kv)}
	s.group = groupcommit.New(maxGroup, s.commitBatch)
	if feed, ok := kv.(ChangeFeed); ok {
		feed.Subscribe(s.remoteChanges)
	}
	return s
}

// KV returns the underlying key-value store.
func (s *Store) KV() KV { return s.kv }

// PutOptions adjusts a write.
type PutOptions struct {
	// IfMatch, when set, is the versionId the stored resource must
	// currently have (an ETag like W/"<id>" is accepted too); otherwise
	// the write fails with ErrConflict. Ignored by Create.
	IfMatch string
	// TTL > 0 makes the resource and its index entries expire together.
	// Only Login, AuditEvent and AsyncJob accept a TTL.
	TTL time.Duration
	// ProjectQuota > 0 bounds the bytes of the project's bot records
	// (AuditEvents and AsyncJobs, record and index keys): a bot record
	// that would take its project past it fails with a *QuotaError. The
	// check reads a sum at most a second old plus this process's writes
	// since, or on a KV other processes write too (SharedKV) a sum read in
	// the write's own transaction (usageCacheTTL says why). Bot records are accounted, in the
	// transaction that writes them, whether or not a quota is given
	// (usage.go).
	ProjectQuota int64
	// DiskReserve > 0 refuses the write with ErrUnwritable when the
	// storage has less free space than this many bytes (KVs that
	// implement FreeSpacer only). Writers of bulk records pass a larger
	// reserve than sign-ins, so a filling disk refuses them first.
	DiskReserve uint64
	// Deferred lets the write return once it is committed and visible,
	// before it is synced to disk, on a KV that implements
	// DeferredUpdater (see there): a crash of the process keeps it, a
	// crash of the machine shortly after the return may lose it. For
	// records nobody waits for, such as AuditEvents.
	Deferred bool
}

// Create stores r as a new resource. It always assigns a new UUID id
// (ignoring any id r has), a new meta.versionId and meta.lastUpdated, and
// updates r in place. On error r is left as it was. It returns a
// *ValidationError for invalid content and ErrConflict when a unique value
// (email, bot identifier, membership externalId) is taken.
func (s *Store) Create(ctx context.Context, r Resource, o PutOptions) error {
	res, err := asStorable(r)
	if err != nil {
		return err
	}
	b := r.Base()
	saved := *b
	b.ID = newID()
	o.IfMatch = ""
	err = s.checkDiskReserve(o.DiskReserve)
	var w *pendingWrite
	if err == nil {
		w, err = s.prepare(res, o, false)
	}
	if err == nil {
		err = s.commitGrouped(ctx, w)
	}
	if err != nil {
		*b = saved
		return err
	}
	return nil
}

// Put creates or replaces the resource with r's id, which is required and
// must have FHIR id syntax. Replacing updates the indexes atomically (an
// old email, for example, becomes free). It reports whether the resource
// was created. On error r is left as it was.
func (s *Store) Put(ctx context.Context, r Resource, o PutOptions) (created bool, err error) {
	res, err := asStorable(r)
	if err != nil {
		return false, err
	}
	b := r.Base()
	if !ValidID(b.ID) {
		return false, invalid("id", fmt.Sprintf("%q is not a valid id ([A-Za-z0-9-.]{1,64})", b.ID))
	}
	saved := *b
	created, err = s.write(ctx, res, o, true)
	if err != nil {
		*b = saved
		return false, err
	}
	return created, nil
}

// write stamps, validates and stores r with its indexes in one transaction.
func (s *Store) write(ctx context.Context, r storable, o PutOptions, replace bool) (bool, error) {
	if err := s.checkDiskReserve(o.DiskReserve); err != nil {
		return false, err
	}
	w, err := s.prepare(r, o, replace)
	if err != nil {
		return false, err
	}
	err = s.applyWrites(ctx, []*pendingWrite{w}, false)
	s.changes.note(w.typ, r.Base().ID)
	if err != nil {
		return false, fmt.Errorf("writing %s/%s: %w", w.typ, r.Base().ID, err)
	}
	return w.created, nil
}

// CreateAll creates several resources in one transaction, all or none:
// one commit (and one disk sync) for the lot, which is what batched
// writers such as the audit log need. Each gets a new id, as with Create.
// On error the resources are left as they were.
func (s *Store) CreateAll(ctx context.Context, rs []Resource, o PutOptions) error {
	o.IfMatch = ""
	if err := s.checkDiskReserve(o.DiskReserve); err != nil {
		return err
	}
	saved := make([]Base, len(rs))
	restore := func() {
		for i, r := range rs {
			*r.Base() = saved[i]
		}
	}
	writes := make([]*pendingWrite, len(rs))
	for i, r := range rs {
		res, err := asStorable(r)
		if err != nil {
			restore()
			return err
		}
		saved[i] = *r.Base()
		r.Base().ID = newID()
		if writes[i], err = s.prepare(res, o, false); err != nil {
			restore()
			return err
		}
	}
	err := s.applyWrites(ctx, writes, true)
	for _, w := range writes {
		s.changes.note(w.typ, w.r.Base().ID)
	}
	if err != nil {
		restore()
		return fmt.Errorf("writing %d resources: %w", len(rs), err)
	}
	return nil
}

// applyWrites applies writes in one transaction, with the accounting of
// their bot records; named says to name the failing write in the error.
func (s *Store) applyWrites(ctx context.Context, writes []*pendingWrite, named bool) error {
	if err := s.refreshUsage(ctx, writes...); err != nil {
		return err
	}
	update := s.kv.Update
	if du, ok := s.kv.(DeferredUpdater); ok && allDeferred(writes) {
		update = du.UpdateDeferred
	}
	var u *usage
	err := update(ctx, func(tx Txn) error {
		u = s.newUsage(tx)
		if err := prefetch(tx, writes); err != nil {
			return err
		}
		for _, w := range writes {
			if err := w.apply(tx, u); err != nil {
				if named {
					return fmt.Errorf("%s/%s: %w", w.typ, w.r.Base().ID, err)
				}
				return err
			}
		}
		return u.flush()
	})
	if err == nil {
		u.committed()
	}
	return err
}

// allDeferred says every write may return before the disk sync; a group
// commit may mix them with writes that may not.
func allDeferred(writes []*pendingWrite) bool {
	for _, w := range writes {
		if !w.o.Deferred {
			return false
		}
	}
	return len(writes) > 0
}

// prefetch reads, in one go, the keys that applying several writes checks
// (the records replaced, the referenced records, the unique index entries),
// when tx can: on PostgreSQL each would otherwise be a round trip.
func prefetch(tx Txn, writes []*pendingWrite) error {
	p, ok := tx.(Prefetcher)
	if !ok || len(writes) < 2 {
		return nil
	}
	var keys [][]byte
	for _, w := range writes {
		if w.replace {
			keys = append(keys, recordKey(w.typ, w.r.Base().ID))
		}
		for _, ref := range w.refs {
			keys = append(keys, recordKey(ref.resourceType, ref.id))
		}
		for _, e := range w.newIdx {
			if e.unique {
				keys = append(keys, e.key)
			}
		}
	}
	return p.Prefetch(keys)
}

// pendingWrite is a stamped, validated and encoded resource, ready to be
// applied inside a transaction.
type pendingWrite struct {
	r       storable
	typ     string
	o       PutOptions
	replace bool
	data    []byte
	newIdx  []indexEntry
	refs    []mustExist
	ifMatch string
	size    int64 // bytes of the record and its keys, for bot-record usage
	created bool  // set by apply
}

// prepare stamps and validates r and encodes it, outside any transaction.
func (s *Store) prepare(r storable, o PutOptions, replace bool) (*pendingWrite, error) {
	typ := r.resourceType()
	b := r.Base()
	if b.ResourceType != "" && b.ResourceType != typ {
		return nil, invalid("resourceType", fmt.Sprintf("is %q, expected %q", b.ResourceType, typ))
	}
	if o.TTL < 0 {
		return nil, fmt.Errorf("writing %s: negative TTL %s", typ, o.TTL)
	}
	if o.TTL > 0 && !r.allowsTTL() {
		return nil, fmt.Errorf("writing %s: resources of this type cannot have a TTL", typ)
	}
	b.ResourceType = typ
	now := s.now()
	b.Meta.VersionID = uuid.NewString()
	b.Meta.LastUpdated = FormatTime(now)
	r.normalize(now)
	if err := r.validate(); err != nil {
		return nil, err
	}
	data, err := encodeRecord(r)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", typ, err)
	}
	w := &pendingWrite{
		r: r, typ: typ, o: o, replace: replace, data: data,
		newIdx: allIndexes(r), refs: r.references(), ifMatch: normalizeIfMatch(o.IfMatch),
	}
	if isBotRecord(typ) {
		w.size = int64(len(data) + len(recordKey(typ, b.ID)))
		for _, e := range w.newIdx {
			w.size += int64(len(e.key))
		}
	}
	return w, nil
}

// apply stores the record and its indexes in tx, checking references,
// unique indexes and the expected version, and charges a bot record to its
// project's usage in u (which the caller flushes).
func (w *pendingWrite) apply(tx Txn, u *usage) error {
	typ, b, o := w.typ, w.r.Base(), w.o
	w.created = true
	var oldIdx []indexEntry
	if w.replace {
		oldData, err := tx.Get(recordKey(typ, b.ID))
		var old storable
		if err == nil {
			old, err = decodeRecord(typ, oldData)
		}
		switch {
		case errors.Is(err, ErrNotFound):
			if w.ifMatch != "" {
				return fmt.Errorf("%w: version conflict: %s/%s does not exist", ErrConflict, typ, b.ID)
			}
		case err != nil:
			return err
		default:
			w.created = false
			if w.ifMatch != "" && old.Base().Meta.VersionID != w.ifMatch {
				return fmt.Errorf("%w: version conflict: %s/%s is not at version %q", ErrConflict, typ, b.ID, w.ifMatch)
			}
			oldIdx = allIndexes(old)
			if v, ok := w.r.(versioned); ok {
				if err := keepVersion(tx, typ, b.ID, oldData, v.keptVersions()); err != nil {
					return err
				}
			}
		}
	}
	for _, ref := range w.refs {
		if _, err := tx.Get(recordKey(ref.resourceType, ref.id)); err != nil {
			if errors.Is(err, ErrNotFound) {
				return invalid(ref.field, fmt.Sprintf("%s/%s does not exist", ref.resourceType, ref.id))
			}
			return err
		}
		if err := tx.Set(guardKey(ref.resourceType, ref.id), nil, 0); err != nil {
			return err
		}
	}
	for _, e := range w.newIdx {
		if !e.unique {
			continue
		}
		holder, err := tx.Get(e.key)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		case string(holder) != b.ID:
			return fmt.Errorf("%w: %s already exists", ErrConflict, e.what)
		}
	}
	if w.size > 0 && b.Meta.Project != "" {
		if err := u.charge(b.Meta.Project, w.size, o.TTL, o.ProjectQuota); err != nil {
			return err
		}
	}
	if err := deleteStale(tx, oldIdx, w.newIdx); err != nil {
		return err
	}
	for _, e := range w.newIdx {
		var v []byte
		if e.unique {
			v = []byte(b.ID)
		}
		if err := tx.Set(e.key, v, o.TTL); err != nil {
			return err
		}
	}
	announce(tx, typ, b.ID, w.created)
	return tx.Set(recordKey(typ, b.ID), w.data, o.TTL)
}

// deleteStale deletes the old index entries the new ones do not repeat.
// Only a replaced record has old entries; a created one (every AuditEvent)
// costs nothing here.
func deleteStale(tx Txn, oldIdx, newIdx []indexEntry) error {
	if len(oldIdx) == 0 {
		return nil
	}
	keep := make(map[string]bool, len(newIdx))
	for _, e := range newIdx {
		keep[string(e.key)] = true
	}
	for _, e := range oldIdx {
		if !keep[string(e.key)] {
			if err := tx.Delete(e.key); err != nil {
				return err
			}
		}
	}
	return nil
}

// allIndexes returns the type's indexes plus the generic project index,
// which AuditEvents do without: their listings go through the recorded and
// bot indexes and filter by project there (lister.run), so the entry would be
// written with every bot run and never read. Leaving it out takes one of the
// four keys an AuditEvent wrote (BenchmarkExecute: about 3 µs of CPU per
// run, a fifth of the audit write). Entries written before are never read
// either, and expire with their events.
func allIndexes(r storable) []indexEntry {
	idx := r.indexes()
	b := r.Base()
	if b.Meta.Project != "" && r.resourceType() != "AuditEvent" {
		idx = append(idx, indexEntry{key: indexKey(projectIndex(r.resourceType()), b.ID, b.Meta.Project)})
	}
	return idx
}

// normalizeIfMatch accepts a bare versionId or an ETag (W/"<id>" or "<id>").
func normalizeIfMatch(s string) string {
	s = strings.TrimPrefix(strings.TrimSpace(s), "W/")
	return strings.Trim(s, `"`)
}

// readRecord loads and decodes one record.
func readRecord(tx Txn, resourceType, id string) (storable, error) {
	data, err := tx.Get(recordKey(resourceType, id))
	if err != nil {
		return nil, err
	}
	return decodeRecord(resourceType, data)
}

func decodeRecord(resourceType string, data []byte) (storable, error) {
	r, err := newStorable(resourceType)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("decoding stored %s: %w", resourceType, err)
	}
	return r, nil
}

// Read loads the resource resourceType/id into into, which must be a
// pointer to that type's struct (see [NewResource]). It returns ErrNotFound
// when the resource does not exist or has expired.
func (s *Store) Read(ctx context.Context, resourceType, id string, into Resource) error {
	if _, err := newStorable(resourceType); err != nil {
		return err
	}
	res, err := asStorable(into)
	if err != nil {
		return err
	}
	if res.resourceType() != resourceType {
		return fmt.Errorf("reading %s/%s into a %T", resourceType, id, into)
	}
	if !ValidID(id) {
		return fmt.Errorf("reading %s/%s: %w", resourceType, id, ErrNotFound)
	}
	data, err := s.readKey(ctx, recordKey(resourceType, id))
	if err != nil {
		return fmt.Errorf("reading %s/%s: %w", resourceType, id, err)
	}
	// Decode into a zeroed value so fields absent from the stored JSON do
	// not keep what the caller's struct held.
	reflect.ValueOf(into).Elem().SetZero()
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("decoding stored %s/%s: %w", resourceType, id, err)
	}
	return nil
}

// readKey reads one key: one statement where the KV offers it
// (PointReader), else a View.
func (s *Store) readKey(ctx context.Context, key []byte) ([]byte, error) {
	if p, ok := s.kv.(PointReader); ok {
		return p.ReadKey(ctx, key)
	}
	var data []byte
	err := s.kv.View(ctx, func(tx Txn) error {
		var err error
		data, err = tx.Get(key)
		return err
	})
	return data, err
}

// Delete removes a resource and its index entries. It returns ErrNotFound
// when it does not exist, and ErrConflict for a Project that still has
// memberships, client applications or bots, or a User that still has
// memberships.
func (s *Store) Delete(ctx context.Context, resourceType, id string) error {
	if _, err := newStorable(resourceType); err != nil {
		return err
	}
	if !ValidID(id) {
		return fmt.Errorf("deleting %s/%s: %w", resourceType, id, ErrNotFound)
	}
	err := s.kv.Update(ctx, func(tx Txn) error {
		old, err := readRecord(tx, resourceType, id)
		if err != nil {
			return err
		}
		// Read the guard so a concurrent write that references this
		// resource makes one of the two transactions retry (keys.go).
		if _, err := tx.Get(guardKey(resourceType, id)); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if err := checkNoDependents(tx, resourceType, id); err != nil {
			return err
		}
		for _, e := range allIndexes(old) {
			if err := tx.Delete(e.key); err != nil {
				return err
			}
		}
		if err := tx.Delete(guardKey(resourceType, id)); err != nil {
			return err
		}
		if _, ok := old.(versioned); ok {
			if err := dropVersions(tx, resourceType, id); err != nil {
				return err
			}
		}
		announce(tx, resourceType, id, false)
		return tx.Delete(recordKey(resourceType, id))
	})
	s.changes.note(resourceType, id)
	if err != nil {
		return fmt.Errorf("deleting %s/%s: %w", resourceType, id, err)
	}
	return nil
}

// dependents lists, per deletable type, the indexes whose entries for the
// resource's id block its deletion.
var dependents = map[string][]struct{ index, resourceType string }{
	"Project": {
		{projectIndex("ProjectMembership"), "ProjectMembership"},
		{projectIndex("ClientApplication"), "ClientApplication"},
		{projectIndex("Bot"), "Bot"},
		{projectIndex("Subscription"), "Subscription"},
	},
	"User": {
		{idxMembershipUser, "ProjectMembership"},
	},
}

func checkNoDependents(tx Txn, resourceType, id string) error {
	for _, d := range dependents[resourceType] {
		found := false
		err := tx.Scan(indexPrefixKey(d.index, id), false, func(_, _ []byte) error {
			found = true
			return ErrStopScan
		})
		if err != nil {
			return err
		}
		if found {
			return fmt.Errorf("%w: %s %s still has %s resources; delete them first", ErrConflict, resourceType, id, d.resourceType)
		}
	}
	return nil
}

// newID names a new record: a time-ordered UUID (RFC 9562 version 7, a
// millisecond timestamp then 74 random bits). Records and most index keys
// end in the id, and the high-volume records (a Login per token exchange, an
// AuditEvent per bot run) are only ever appended. Random ids scatter every
// memtable across the whole key range, so each compaction rewrites most of
// the level below; time-ordered ids land at the end of the range and
// compaction mostly moves tables down. BenchmarkRecordIDs, 307k Logins and
// AuditEvents: CPU including compaction -33% (with Snappy tables, before
// they were left uncompressed: -31%, and table bytes -30% because keys that
// share a longer prefix compress better). The ids stay valid FHIR ids,
// Medplum's format and unguessable; the creation time they reveal is in
// every record's meta.lastUpdated anyway. A variable so the benchmark can
// compare against random ids.
var newID = func() string { return uuid.Must(uuid.NewV7()).String() }

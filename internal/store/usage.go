package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Bot records — AuditEvents and AsyncJobs, written per bot run and kept
// for a TTL — are accounted per project, so that a quota can bound what one
// project keeps in the store (PutOptions.ProjectQuota).
//
// The count lives in the store, adjusted in the same transaction as the
// write, so it survives restarts and is right with several gateways on one
// store. Records expire silently (a KV drops an expired key without telling
// anyone), so a single counter could never be decremented. Instead each
// project has one bucket per day on which its records expire:
//
//	q/<project>/<day>/<shard>  -> decimal bytes of the project's bot records that expire on that day
//
// where <day> is the number of whole bucket widths (a day) since the Unix
// epoch, ten digits, and <shard> spreads concurrent writers (usageShards).
// A bucket's own TTL ends with its day, so it expires no earlier than
// every record it counts and at most a day later. A project's usage is the
// sum of its live buckets: with the default 30-day AuditEvents and 7-day
// jobs, at most 31 days of usageShards keys.
//
// The count errs on the high side, never the low: records deleted or
// replaced before they expire (a job is written when accepted and again
// when it ends) keep counting until their bucket expires.

// ErrQuotaExceeded is wrapped by a *QuotaError.
var ErrQuotaExceeded = errors.New("quota exceeded")

// QuotaError refuses a bot record that would take its project past
// PutOptions.ProjectQuota.
type QuotaError struct {
	Project string
	// Used is what the project's bot records take now, Limit the quota,
	// both in bytes.
	Used, Limit int64
	// Frees is when the oldest bucket of the project's records expires,
	// and so when space comes back at the latest (zero when none will).
	Frees time.Time
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("project %s: %v: its bot records (AuditEvents and async jobs) take %d bytes of the %d-byte quota",
		e.Project, ErrQuotaExceeded, e.Used, e.Limit)
}

func (e *QuotaError) Unwrap() error { return ErrQuotaExceeded }

// usagePrefix is the key prefix of the usage buckets.
const usagePrefix = "q/"

// defaultUsageBucket is the width of a usage bucket.
const defaultUsageBucket = 24 * time.Hour

// noExpiryDay is the bucket of records written without a TTL.
const noExpiryDay = 9999999999

// usageShards spreads each day's count over several keys. Every write
// reads and rewrites the key it adds to, and an optimistic KV retries a
// transaction whose read key another one wrote meanwhile: with a single
// key, concurrent writers of one project (the audit writer, async jobs
// ending) kept conflicting until they gave up. A write picks a shard at
// random, so two of them collide one time in usageShards.
const usageShards = 8

// usageCacheTTL is how long a project's summed usage is reused by quota
// checks on a KV one process owns (Badger). Summing reads every bucket,
// which would make every write conflict with every other; the check reads
// the sum from its own snapshot instead, at most this old, plus what this
// process has written since, which is exact but for writes in flight
// together. On a KV several processes share ([SharedKV]: PostgreSQL), that
// sum would miss what the other gateways wrote meanwhile, so a write under
// a quota sums the buckets inside its own transaction: exact across
// replicas, and concurrent bot-record writes of one project run one after
// the other (the KV retries the ones that conflicted).
const usageCacheTTL = time.Second

// SharedKV is implemented by a KV that several gateway processes write at
// once (PostgreSQL), so that nothing the store caches may count on seeing
// every write.
type SharedKV interface {
	KV
	// SharedByProcesses reports that other processes may write the KV.
	SharedByProcesses() bool
}

// SharedByProcesses reports that other gateway processes may write the
// store's KV too (PostgreSQL), so that what the process alone knows — such
// as which async jobs it was running — says nothing of theirs.
func (s *Store) SharedByProcesses() bool { return s.shared }

// sharedByProcesses tells whether kv may be written by other processes.
func sharedByProcesses(kv KV) bool {
	s, ok := kv.(SharedKV)
	return ok && s.SharedByProcesses()
}

// isBotRecord tells whether records of the type are accounted.
func isBotRecord(resourceType string) bool {
	return resourceType == "AuditEvent" || resourceType == "AsyncJob"
}

func usageProjectPrefix(project string) []byte {
	return append(appendEscaped([]byte(usagePrefix), project), '/')
}

func usageKey(project string, day int64, shard int) []byte {
	return fmt.Appendf(usageProjectPrefix(project), "%010d/%d", day, shard)
}

// projectUsage is a project's summed usage.
type projectUsage struct {
	total int64
	// oldest is the earliest day with bytes in it (noExpiryDay if none).
	oldest int64
	readAt time.Time
}

// usageCache keeps the summed usage of the projects written lately.
type usageCache struct {
	mu       sync.Mutex
	projects map[string]*projectUsage
}

// sumUsage reads a project's live buckets.
func sumUsage(tx Txn, project string) (projectUsage, error) {
	pu := projectUsage{oldest: noExpiryDay}
	prefix := usageProjectPrefix(project)
	err := tx.Scan(prefix, false, func(key, value []byte) error {
		dayText, _, _ := strings.Cut(string(key[len(prefix):]), "/")
		day, err1 := strconv.ParseInt(dayText, 10, 64)
		n, err2 := strconv.ParseInt(string(value), 10, 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("reading usage bucket %q: malformed", key)
		}
		pu.total += n
		if n > 0 && day < pu.oldest {
			pu.oldest = day
		}
		return nil
	})
	return pu, err
}

// refreshUsage makes sure the cached sums of the projects whose bot
// records ws write under a quota are at most usageCacheTTL old. It runs
// before the write's transaction, in a snapshot of its own.
func (s *Store) refreshUsage(ctx context.Context, ws ...*pendingWrite) error {
	if s.shared {
		return nil // charge sums in the write's transaction
	}
	now := time.Now()
	var stale []string
	locked := false
	for _, w := range ws {
		project := w.r.Base().Meta.Project
		if w.size == 0 || w.o.ProjectQuota <= 0 || project == "" {
			continue
		}
		if !locked {
			s.usage.mu.Lock()
			locked = true
		}
		if pu := s.usage.projects[project]; pu == nil || now.Sub(pu.readAt) > usageCacheTTL {
			stale = append(stale, project)
		}
	}
	if locked {
		s.usage.mu.Unlock()
	}
	if len(stale) == 0 {
		return nil
	}
	sums := make(map[string]projectUsage, len(stale))
	err := s.kv.View(ctx, func(tx Txn) error {
		for _, p := range stale {
			pu, err := sumUsage(tx, p)
			if err != nil {
				return err
			}
			pu.readAt = now
			sums[p] = pu
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading bot-record usage: %w", err)
	}
	s.usage.mu.Lock()
	defer s.usage.mu.Unlock()
	if s.usage.projects == nil {
		s.usage.projects = map[string]*projectUsage{}
	}
	for p, pu := range sums {
		s.usage.projects[p] = &pu
	}
	return nil
}

// usage is the accounting of one transaction attempt.
type usage struct {
	s       *Store
	tx      Txn
	now     time.Time
	width   int64 // seconds
	shard   int
	buckets []chargedBucket // a few at most: linear search beats maps
	// sums are the projects' usage read in this transaction (shared KVs).
	sums []summedUsage
}

type summedUsage struct {
	project string
	projectUsage
}

// chargedBucket is a bucket this transaction adds to.
type chargedBucket struct {
	project string
	day     int64
	value   int64 // the bucket's new value
	added   int64 // what this transaction added
	ttl     time.Duration
	key     []byte
}

func (s *Store) newUsage(tx Txn) *usage {
	return &usage{s: s, tx: tx, now: time.Now(), width: max(int64(s.usageBucket/time.Second), 1), shard: rand.IntN(usageShards)}
}

// projectUsage is a project's usage as the quota check sees it, without
// what this transaction adds: the cached sum on a KV this process owns, a
// sum read in the transaction on a shared one (usageCacheTTL says why).
func (u *usage) projectUsage(project string) (projectUsage, error) {
	if u.s.shared {
		for _, pu := range u.sums {
			if pu.project == project {
				return pu.projectUsage, nil
			}
		}
		pu, err := sumUsage(u.tx, project)
		if err != nil {
			return pu, err
		}
		u.sums = append(u.sums, summedUsage{project, pu})
		return pu, nil
	}
	var pu projectUsage
	u.s.usage.mu.Lock()
	if c := u.s.usage.projects[project]; c != nil {
		pu = *c
	}
	u.s.usage.mu.Unlock()
	return pu, nil
}

// charged is what this transaction has added to a project so far.
func (u *usage) charged(project string) int64 {
	var n int64
	for i := range u.buckets {
		if u.buckets[i].project == project {
			n += u.buckets[i].added
		}
	}
	return n
}

// charge adds n bytes of records expiring after ttl to a project, refusing
// them with a *QuotaError when quota > 0 and the project would pass it.
func (u *usage) charge(project string, n int64, ttl time.Duration, quota int64) error {
	if quota > 0 {
		pu, err := u.projectUsage(project)
		if err != nil {
			return err
		}
		if used := pu.total + u.charged(project); used+n > quota {
			qe := &QuotaError{Project: project, Used: used, Limit: quota}
			if pu.oldest != noExpiryDay && pu.total > 0 {
				qe.Frees = time.Unix((pu.oldest+1)*u.width, 0)
			}
			return qe
		}
	}
	day := int64(noExpiryDay)
	if ttl > 0 {
		day = u.now.Add(ttl).Unix() / u.width
	}
	i := 0
	for ; i < len(u.buckets); i++ {
		if u.buckets[i].day == day && u.buckets[i].project == project {
			break
		}
	}
	if i == len(u.buckets) {
		b := chargedBucket{project: project, day: day, key: usageKey(project, day, u.shard)}
		old, err := u.tx.Get(b.key)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		default:
			if b.value, err = strconv.ParseInt(string(old), 10, 64); err != nil {
				return fmt.Errorf("reading usage bucket %q: malformed", b.key)
			}
		}
		if day != noExpiryDay {
			// A second past the day's end, so that rounding in the KV never
			// lets the bucket go before its records.
			b.ttl = time.Unix((day+1)*u.width+1, 0).Sub(u.now)
		}
		u.buckets = append(u.buckets, b)
	}
	u.buckets[i].value += n
	u.buckets[i].added += n
	return nil
}

// flush writes the buckets charged in this transaction.
func (u *usage) flush() error {
	for _, b := range u.buckets {
		if err := u.tx.Set(b.key, strconv.AppendInt(nil, b.value, 10), b.ttl); err != nil {
			return err
		}
	}
	return nil
}

// committed adds what a committed transaction charged to the cached sums,
// so this process's own writes count at once.
func (u *usage) committed() {
	if u == nil || len(u.buckets) == 0 {
		return
	}
	u.s.usage.mu.Lock()
	defer u.s.usage.mu.Unlock()
	for _, b := range u.buckets {
		if pu := u.s.usage.projects[b.project]; pu != nil {
			pu.total += b.added
			pu.oldest = min(pu.oldest, b.day)
		}
	}
}

// ProjectBotRecordBytes returns the bytes the project's bot records
// (AuditEvents and AsyncJobs) take, as the quota sees them.
func (s *Store) ProjectBotRecordBytes(ctx context.Context, project string) (int64, error) {
	var pu projectUsage
	err := s.kv.View(ctx, func(tx Txn) error {
		var err error
		pu, err = sumUsage(tx, project)
		return err
	})
	return pu.total, err
}

// FreeSpacer is implemented by a KV kept on a local filesystem.
type FreeSpacer interface {
	// FreeSpace returns the bytes available to the store's files; it may
	// be up to a second old.
	FreeSpace() (uint64, error)
}

// checkDiskReserve refuses a write with ErrUnwritable when the KV reports
// less free space than reserve. A KV that cannot tell (in memory, or a
// database server with its own disk) is not checked.
func (s *Store) checkDiskReserve(reserve uint64) error {
	if reserve == 0 {
		return nil
	}
	fs, ok := s.kv.(FreeSpacer)
	if !ok {
		return nil
	}
	free, err := fs.FreeSpace()
	if err != nil {
		return fmt.Errorf("%w: checking free space: %v", ErrUnwritable, err)
	}
	if free < reserve {
		return fmt.Errorf("%w: %d MiB free, less than the %d MiB this write must leave", ErrUnwritable, free>>20, reserve>>20)
	}
	return nil
}

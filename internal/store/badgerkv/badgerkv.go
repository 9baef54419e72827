// Package badgerkv implements [store.KV] on Badger, the embedded store: one
// process owns one directory (Badger locks it). It is the default storage of
// the gateway; package pgkv is the one several replicas can share. Both pass
// the same conformance suite (kvtest).
//
// Acknowledged writes are synced to disk (syncer.go), except those made
// with UpdateDeferred, which are synced within a tenth of a second. A write guard refuses writes with
// [store.ErrUnwritable] before Badger would meet a full or read-only disk
// (guard.go), the value log is garbage-collected and, on Linux, mapped table
// pages are handed back to the kernel in the background (trim_linux.go).
package badgerkv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/fhirgate/fhirgate/internal/store"
)

// ErrLocked is wrapped by [Open] when another process (or another open
// handle in this process) holds the storage directory.
var ErrLocked = errors.New("storage directory locked")

// Options configures [Open]. The zero value (plus Dir) gives the
// small-footprint defaults; acknowledged writes are always synced to disk
// (UpdateDeferred's within a tenth of a second of their commit).
type Options struct {
	// Dir is the storage directory; required unless InMemory. Badger creates
	// it with mode 0700 when missing.
	Dir string
	// InMemory keeps everything in memory; for tests only.
	InMemory bool
	// Logger receives Badger's own log lines (the caller adapts zap); nil
	// discards them.
	Logger Logger
	// GCInterval is how often the value log is garbage-collected. Values
	// over the value threshold (bot code, AuditEvents, most Logins, async
	// job results) live in the value log, and the space of
	// the deleted, replaced and expired ones comes back only through its
	// GC. 0 means DefaultGCInterval; negative turns it off.
	GCInterval time.Duration
	// TrimInterval is how often, on Linux, the store's memory-mapped table
	// and value-log pages are handed back to the kernel (see
	// trimmer). Without it the gateway's resident memory grows
	// with the stored data. 0 means DefaultTrimInterval; negative turns it
	// off.
	TrimInterval time.Duration

	// valueLogFileSize overrides the value log's file size, for tests
	// that need several files (Badger's minimum is 1 MiB).
	valueLogFileSize int64
}

// DefaultGCInterval is how often an on-disk store collects its value log.
// A pass that finds nothing to rewrite costs one look at Badger's discard
// statistics.
const DefaultGCInterval = 10 * time.Minute

// DefaultTrimInterval is how often an on-disk store hands newly written
// table pages back. A pass reads /proc/self/maps and advises only tables it
// has not handled twice and the value log (BenchmarkTrimmerPass: 0.4-0.6 ms for
// 200-300 tables); between passes what Badger writes stays resident, about
// 0.7 MiB per second in the benchmark mix's soak.
const DefaultTrimInterval = 5 * time.Second

// Logger is the logger Badger writes to. It has the same method set as
// badger.Logger so callers need not import Badger.
type Logger interface {
	Errorf(string, ...any)
	Warningf(string, ...any)
	Infof(string, ...any)
	Debugf(string, ...any)
}

// KV is the embedded [store.KV] implementation.
type KV struct {
	db     *badger.DB
	logger Logger
	guard  *writeGuard // nil in memory
	syncer *syncer     // nil in memory

	// Periodic maintenance (value-log GC, trimming), stopped by Close.
	stop  chan struct{}
	loops sync.WaitGroup
	// The resolved intervals (0 when the loop is off) and the passes run,
	// for tests.
	gcEvery, trimEvery   time.Duration
	gcPasses, trimPasses atomic.Int64

	// FreeSpace's last reading and when it expires (unix nanos).
	freeMu    sync.Mutex
	free      uint64
	freeErr   error
	freeUntil int64

	closeOnce sync.Once
	closeErr  error
}

var (
	_ store.KV              = (*KV)(nil)
	_ store.FreeSpacer      = (*KV)(nil)
	_ store.DeferredUpdater = (*KV)(nil)
)

// freeSpaceTTL is how long a FreeSpace reading is reused.
const freeSpaceTTL = time.Second

// FreeSpace returns the bytes available to unprivileged users on the store
// directory's filesystem, read at most once a second. An in-memory store
// reports no limit.
func (b *KV) FreeSpace() (uint64, error) {
	if b.guard == nil {
		return math.MaxUint64, nil
	}
	b.freeMu.Lock()
	defer b.freeMu.Unlock()
	if now := time.Now().UnixNano(); now >= b.freeUntil {
		b.free, b.freeErr = b.guard.freeSpace()
		b.freeUntil = now + int64(freeSpaceTTL)
	}
	return b.free, b.freeErr
}

// maxUpdateAttempts bounds the retries of a conflicting transaction; beyond
// it the contention is pathological and the caller gets store.ErrConflict.
const maxUpdateAttempts = 10

// Open opens (or creates) a Badger database.
func Open(o Options) (*KV, error) {
	if o.Dir == "" && !o.InMemory {
		return nil, errors.New("opening storage: a directory is required")
	}
	db, err := badger.Open(badgerOptions(o))
	if err != nil {
		// Badger's directory lock is an flock on the directory, so a second
		// handle in the same process is refused too. Its error is a plain
		// wrapped string, hence the text match.
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, &lockedError{dir: o.Dir, cause: err}
		}
		return nil, fmt.Errorf("opening storage directory %s: %w", o.Dir, err)
	}
	b := &KV{db: db, logger: o.Logger, stop: make(chan struct{})}
	if !o.InMemory {
		// Room for a memtable flush, a WAL rotation and compaction output.
		b.guard = newWriteGuard(o.Dir, 4*uint64(badgerOptions(o).MemTableSize)+8<<20)
		logs := &logFiles{dir: o.Dir}
		if err := logs.syncRotated(); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("opening storage directory %s: %w", o.Dir, err)
		}
		b.syncer = newSyncer(func() error {
			if err := db.Sync(); err != nil {
				return err
			}
			return logs.syncRotated()
		}, defaultSyncPace)
		if b.gcEvery = max(cmp.Or(o.GCInterval, DefaultGCInterval), 0); b.gcEvery > 0 {
			b.every(b.gcEvery, &b.gcPasses, func() bool { b.RunGC(); return true })
		}
		if b.trimEvery = max(cmp.Or(o.TrimInterval, DefaultTrimInterval), 0); b.trimEvery > 0 && canPageOut {
			b.startTrimming(o.Dir)
		} else {
			b.trimEvery = 0
		}
	}
	return b, nil
}

// startTrimming runs a trimmer pass every trimEvery. The kernel names
// mapped files by their absolute, symlink-free path, so dir is resolved
// first. A failure is logged once and ends the loop: it would fail the
// same way on every pass (an old kernel, no /proc).
func (b *KV) startTrimming(dir string) {
	resolved, err := filepath.Abs(dir)
	if err == nil {
		resolved, err = filepath.EvalSymlinks(resolved)
	}
	if err != nil {
		b.warnf("not trimming the store's mapped memory: resolving %s: %v", dir, err)
		b.trimEvery = 0
		return
	}
	tr := newTrimmer(resolved)
	b.every(b.trimEvery, &b.trimPasses, func() bool {
		if _, err := tr.pass(); err != nil {
			b.warnf("not trimming the store's mapped memory any more: %v", err)
			return false
		}
		return true
	})
}

// every runs fn every interval on its own goroutine until Close or until fn
// returns false, counting the passes.
func (b *KV) every(interval time.Duration, passes *atomic.Int64, fn func() bool) {
	b.loops.Add(1)
	go func() {
		defer b.loops.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-t.C:
				ok := fn()
				passes.Add(1)
				if !ok {
					return
				}
			}
		}
	}()
}

func (b *KV) warnf(format string, args ...any) {
	if b.logger != nil {
		b.logger.Warningf(format, args...)
	}
}

// badgerOptions starts from Badger's defaults and overrides only what keeps
// the whole gateway idle under 80 MiB RSS (Badger's defaults alone use about
// 120 MiB: a 64 MiB memtable x5 and a 256 MiB block cache). fhirgate's
// working set is small (thousands of records, mostly under 1 KiB).
//
// File modes: Badger creates the directory 0700 and its MANIFEST, KEYREGISTRY
// and DISCARD files 0600, but memtable WALs, value logs and SSTables are
// created through ristretto's z.OpenMmapFile with 0666 (minus umask) and
// there is no option to change that. The 0700 directory is what keeps other
// users out; operators who pre-create the directory must keep it private.
func badgerOptions(o Options) badger.Options {
	opts := badger.DefaultOptions(o.Dir)
	opts.InMemory = o.InMemory
	if o.InMemory {
		opts.Dir, opts.ValueDir = "", ""
	}
	// Acknowledged writes must survive a crash; the syncer syncs them
	// (syncer.go), not Badger. With SyncWrites on, v4.9.6 msyncs the
	// memtable WAL once per write batch in DB.writeToLSM, in the single
	// write goroutine (strace of BenchmarkConcurrentCreates: serial, 2
	// msyncs per create; 32 writers, about 1.1), so every commit queued
	// behind a sync; and there was no way to commit one transaction
	// without waiting for the disk.
	opts.SyncWrites = false
	// Each memtable is an arena of about 1.3x this size, and the level-0
	// table it is flushed into is built in memory (table builders take
	// their buffers from a pool of up to 8 that Badger keeps while it
	// writes, and a pooled buffer keeps the largest size it ever grew to).
	// 2 MiB instead of Badger's 64 MiB: the largest transaction is then 15%
	// of it, 314 KB, which still holds the biggest batch we write (128
	// AuditEvents, each a value-log pointer or a value under the value
	// threshold, plus their index keys — TestFullAuditBatchFitsOneTransaction
	// in botapi). Replaying 300k Logins and AuditEvents into a test store,
	// 8 MiB -> 4 MiB took the live heap Badger keeps after the writes from
	// 87 to 43 MiB; 4 -> 2 MiB, in fhirgate-bench scenario 5, took the
	// anonymous memory after 100k mixed requests from 157 to 114-117 MiB
	// (RSS 228 -> 183-190 MiB) for +10% CPU per stored record
	// (BenchmarkRecordIDs, more level-0 flushes).
	opts.MemTableSize = 2 << 20
	// One mutable plus one flushing memtable; the default 5 would pin up to
	// 5 arenas under write bursts.
	opts.NumMemtables = 2
	// Values of 512 bytes and more go to the value log, written once, and
	// the tree keeps a 12-byte pointer; smaller ones stay in the tree, which
	// compaction rewrites level by level. The line falls between the
	// records that exchanges and bot runs read (as fhirgate-bench stores
	// them: User 195 bytes, ProjectMembership 346, ClientApplication 260,
	// Project 173, Bot 494) and those appended per request (an AuditEvent
	// per bot run, 900; a Login per exchange, 723), so the appended ones no
	// longer pass through every level. BenchmarkRecordIDs (Logins and
	// AuditEvents): CPU per record with compaction -30% against 1 KiB,
	// table bytes per record 678 -> 342 (+367 in the value log); in
	// fhirgate-bench scenario 3, Badger's table building (level-0 flushes
	// and compaction) fell from 24% to 4% of the gateway process's CPU.
	// Badger requires this to stay below 15% of MemTableSize (the max batch
	// size).
	opts.ValueThreshold = 512
	// No compression, and so no block cache (Badger's cache holds
	// decompressed blocks; uncompressed tables are read straight from their
	// mapping). Badger builds each table in a buffer taken from a pool of
	// up to 8 that it keeps while it writes, each as large as the largest
	// build it served; with Snappy every block is held twice (plain and
	// compressed) and the pooled buffers were 52 of the 73 MB of live heap
	// after fhirgate-bench's 100k mixed requests. Without it (scenario 5,
	// 2-minute soak, same run): anonymous memory after the mix 127 -> 76
	// MiB, RSS 194 -> 153 MiB, peak RSS during the soak 332 -> 206 MiB, CPU
	// per request 185 -> 181 us; a replay of 307k Logins and AuditEvents
	// keeps 27-34 instead of 60-188 MB of live heap and reads a user 11
	// instead of 16-24 us. The price, measured while the value threshold
	// was 1 KiB: tables took 2.9x the disk (about 670 instead of 230 bytes
	// per Login or AuditEvent) and writing cost ~15% more CPU per record.
	opts.Compression = options.None
	opts.BlockCacheSize = 0
	// 0 would keep every table index and bloom filter on the Go heap without
	// bound; a small cache caps it as the data grows.
	opts.IndexCacheSize = 4 << 20
	// Fewer level-0 tables before compaction (default 5, stall at 15) keeps
	// fewer tables open and reads short, at the cost of earlier compaction,
	// which is cheap at this data size.
	opts.NumLevelZeroTables = 3
	opts.NumLevelZeroTablesStall = 8
	// Tables are built in memory before they are written (see Compression
	// above). Badger's defaults (2 MiB base tables, x2 per level below the
	// base level) make the deepest tables grow with the data — 8 MiB after
	// 1.5 million requests of the benchmark mix, with pooled builder
	// buffers of 16-48 MiB each, 256 MiB of live heap that GOGC=100
	// doubles. One size at every level bounds each build buffer whatever
	// the data size: 512 KiB took fhirgate-bench scenario 5's live heap at
	// soak end 280 -> 51 MB and peak RSS 1010 -> 538 MiB (with Snappy).
	// Uncompressed, 1 MiB keeps the same live heap as 512 KiB (20-26 vs
	// 27-34 MB in the replay) with half the files: about one per MiB
	// stored, each an open file and a mapping.
	opts.BaseTableSize = 1 << 20
	opts.TableSizeMultiplier = 1
	// Value log files are mmapped; 64 MiB instead of 1 GiB keeps mappings
	// small and lets value-log GC reclaim space in smaller steps.
	opts.ValueLogFileSize = 64 << 20
	if o.valueLogFileSize > 0 {
		opts.ValueLogFileSize = o.valueLogFileSize
	}
	// Two compactors is Badger's minimum for L0 priority (default 4).
	opts.NumCompactors = 2
	// Goroutines used by Stream (Backup); default 8 multiplies buffers.
	opts.NumGoroutines = 2
	opts.Logger = o.Logger
	return opts
}

type lockedError struct {
	dir   string
	cause error
}

func (e *lockedError) Error() string {
	return fmt.Sprintf("storage directory %s is locked by another fhirgate/caddy process: %v", e.dir, e.cause)
}

func (e *lockedError) Unwrap() []error { return []error{ErrLocked, e.cause} }

// View runs fn in a read-only transaction.
func (b *KV) View(ctx context.Context, fn func(store.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.View(func(txn *badger.Txn) error {
		return fn(&badgerTxn{ctx: ctx, txn: txn})
	})
}

// Update runs fn in a read-write transaction, retrying it on Badger's
// optimistic-concurrency conflicts, and returns once the commit is synced
// to disk.
func (b *KV) Update(ctx context.Context, fn func(store.Txn) error) error {
	wrote, err := b.update(ctx, fn)
	if err != nil || !wrote || b.syncer == nil {
		return err
	}
	// The commit is applied whatever happens now: a cancelled ctx must not
	// turn it into a reported failure that a caller would retry.
	return b.syncer.wait(context.WithoutCancel(ctx), b.syncer.committedOne())
}

// UpdateDeferred implements store.DeferredUpdater: Update without waiting
// for the sync, which the syncer's next pass does, at most defaultSyncPace
// after the previous one began (syncer).
func (b *KV) UpdateDeferred(ctx context.Context, fn func(store.Txn) error) error {
	wrote, err := b.update(ctx, fn)
	if err != nil || !wrote || b.syncer == nil {
		return err
	}
	b.syncer.committedOne()
	return nil
}

// Flush implements store.DeferredUpdater.
func (b *KV) Flush(ctx context.Context) error {
	if b.syncer == nil {
		return nil
	}
	return b.syncer.flush(ctx)
}

// update commits fn, retrying on conflicts. wrote says the committed
// transaction set or deleted a key (one that wrote nothing has nothing to
// sync).
func (b *KV) update(ctx context.Context, fn func(store.Txn) error) (wrote bool, err error) {
	if err := b.guard.check(); err != nil {
		return false, err
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		t := &badgerTxn{ctx: ctx}
		err := b.db.Update(func(txn *badger.Txn) error {
			t.txn, t.wrote = txn, false
			return fn(t)
		})
		if !errors.Is(err, badger.ErrConflict) {
			return t.wrote && err == nil, err
		}
		if attempt == maxUpdateAttempts {
			return false, fmt.Errorf("%w: transaction still conflicting with concurrent writes after %d attempts", store.ErrConflict, attempt)
		}
		// Jitter so that the same set of racing writers does not collide
		// again in lockstep.
		backoff := time.Duration(rand.Int64N(int64(attempt) * int64(time.Millisecond)))
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false, ctx.Err()
		case <-timer.C:
		}
	}
}

// Close closes the database; pending writes are flushed. Calling it again
// returns the first call's result.
func (b *KV) Close() error {
	b.closeOnce.Do(func() {
		// A maintenance pass must not run into the close.
		close(b.stop)
		b.loops.Wait()
		if b.syncer != nil {
			b.syncer.close()
		}
		if err := b.db.Close(); err != nil {
			b.closeErr = fmt.Errorf("closing storage: %w", err)
		}
		_ = b.guard.close()
	})
	return b.closeErr
}

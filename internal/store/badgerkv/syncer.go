package badgerkv

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// syncer makes commits durable. Badger is opened with SyncWrites off, so
// a commit returns once it is in the memtable's write-ahead log and the
// value log — memory-mapped files, in the kernel's page cache: it
// survives the process dying but not the machine. The syncer then syncs
// them to disk; one pass covers every commit counted before it started,
// so concurrent committers share a sync (Badger's own SyncWrites syncs the
// WAL once per write batch, inside its single write goroutine, where every
// other write waits behind it).
//
// Update counts its commit and waits for a pass that started after it:
// the guarantee of SyncWrites, a nil return means durable. While somebody
// waits, passes run back to back. UpdateDeferred counts its commit and
// returns; when only such commits are unsynced, a pass starts at most once
// per pace after the previous one began, so a stream of deferred commits
// (AuditEvent batches, deferred queue jobs) costs a few syncs a second
// rather than one per commit. A sync is not cheap on a VM: it costs
// milliseconds of CPU, and the kernel write-protects every page of the
// mapped logs it wrote back, so the next write to each takes a page fault.
type syncer struct {
	syncFn func() error
	pace   time.Duration
	// after is time.After; tests pass their own to release a held pass.
	after func(time.Duration) <-chan time.Time

	mu   sync.Mutex
	cond *sync.Cond
	// committed counts the commits so far, synced those the last finished
	// pass covered; err is that pass's error.
	committed, synced uint64
	err               error
	// waiters counts the calls in wait; lastStart is when the last pass
	// began. wake tells a loop holding a paced pass back that a waiter or
	// close came.
	waiters   int
	lastStart time.Time
	wake      chan struct{}
	// closed asks the loop to end; finished says it has (no pass will
	// come).
	closed, finished bool
	done             chan struct{}

	passes atomic.Int64 // for tests
}

// defaultSyncPace is how long after a pass began the next one may start
// when nobody waits for it: how long a deferred commit can stay in the
// page cache only. A process kill keeps it (the logs are mapped files);
// a machine crash or power loss within that window loses it.
const defaultSyncPace = 100 * time.Millisecond

func newSyncer(syncFn func() error, pace time.Duration) *syncer {
	return startSyncer(syncFn, pace, time.After)
}

func startSyncer(syncFn func() error, pace time.Duration, after func(time.Duration) <-chan time.Time) *syncer {
	s := &syncer{syncFn: syncFn, pace: pace, after: after,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	go s.loop()
	return s
}

// committedOne counts a commit and returns its number.
func (s *syncer) committedOne() uint64 {
	s.mu.Lock()
	s.committed++
	n := s.committed
	s.mu.Unlock()
	s.cond.Broadcast()
	return n
}

// wait returns once a pass covering commit n has finished, with that
// pass's error, or ctx's error first.
func (s *syncer) wait(ctx context.Context, n uint64) error {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.mu.Unlock() // a waiter between its check and Wait is in Wait now
		s.cond.Broadcast()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.synced < n {
		s.waiters++
		defer func() { s.waiters-- }()
		s.poke()
	}
	for s.synced < n {
		if s.finished {
			return errClosedUnsynced
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		s.cond.Wait()
	}
	return s.err
}

// flush waits for every commit counted so far.
func (s *syncer) flush(ctx context.Context) error {
	s.mu.Lock()
	n := s.committed
	s.mu.Unlock()
	return s.wait(ctx, n)
}

var errClosedUnsynced = errors.New("storage closed before the write was synced to disk")

// poke wakes a loop holding a paced pass back; s.mu is held.
func (s *syncer) poke() {
	select {
	case s.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// loop runs the passes until close, and a last one if close found
// unsynced commits.
func (s *syncer) loop() {
	defer close(s.done)
	s.mu.Lock()
	for {
		for s.synced == s.committed && !s.closed {
			s.cond.Wait()
		}
		if s.synced == s.committed { // closed, nothing left to sync
			s.finished = true
			s.mu.Unlock()
			s.cond.Broadcast()
			return
		}
		if hold := s.pace - time.Since(s.lastStart); hold > 0 && s.waiters == 0 && !s.closed {
			s.mu.Unlock()
			select {
			case <-s.wake: // a waiter or close: look again
				s.mu.Lock()
				continue
			case <-s.after(hold): // the pace is over: sync what there is
			}
			s.mu.Lock()
		}
		target := s.committed
		s.lastStart = time.Now()
		s.mu.Unlock()
		err := s.syncFn()
		s.passes.Add(1)
		s.mu.Lock()
		s.synced, s.err = target, err
		s.cond.Broadcast()
	}
}

// close ends the loop once the commits counted so far are synced, so
// that no waiter is left without its sync. Commits counted later are
// left to Badger's Close, which writes its memtables out.
func (s *syncer) close() {
	s.mu.Lock()
	s.closed = true
	s.poke()
	s.mu.Unlock()
	s.cond.Broadcast()
	<-s.done
}

// logFiles syncs what Badger's DB.Sync misses. DB.Sync syncs the current
// memtable's WAL and the current value log file; with SyncWrites off,
// Badger syncs neither when it rotates it (a full memtable waits for its
// flush into a table; a full value log is only truncated). So a commit
// written before a rotation that a pass's DB.Sync followed would not be
// on disk. After DB.Sync, the pass lists the directory: when a memtable
// WAL or value log appeared since the previous pass, it syncs every WAL
// and the value logs from the previous pass's newest on.
type logFiles struct {
	dir  string
	seen []string // the WALs and value logs at the previous pass
}

func (l *logFiles) syncRotated() error {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var now []string
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".mem") || strings.HasSuffix(n, ".vlog") {
			now = append(now, n)
		}
	}
	rotated := false
	for _, n := range now {
		if !slices.Contains(l.seen, n) {
			rotated = true
			break
		}
	}
	if !rotated {
		l.seen = now
		return nil
	}
	newestVlog := ""
	for _, n := range l.seen {
		if strings.HasSuffix(n, ".vlog") && n > newestVlog {
			newestVlog = n // names are zero-padded file ids
		}
	}
	var errs []error
	for _, n := range now {
		if strings.HasSuffix(n, ".mem") || n >= newestVlog {
			errs = append(errs, fsyncFile(filepath.Join(l.dir, n)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.seen = now
	return nil
}

// fsyncFile syncs a file by path. On Linux fsync writes back the dirty
// pages of every shared mapping of the file, which is how Badger writes
// its logs. A file gone meanwhile was flushed into a synced table.
func fsyncFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

package store

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// auditEvent is an AuditEvent of a project with a console tail of pad
// bytes, so tests can size it.
func auditEvent(project string, pad int) *AuditEvent {
	ev := &AuditEvent{
		Outcome:     "0",
		OutcomeDesc: strings.Repeat("x", pad),
		Entity:      []AuditEventEntity{{What: Reference{Reference: "Bot/0190b3c2-7a1e-7c3d-9f00-1234567890ab"}}},
	}
	ev.Meta.Project = project
	return ev
}

func usageOf(t *testing.T, s *Store, project string) int64 {
	t.Helper()
	n, err := s.ProjectBotRecordBytes(context.Background(), project)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestProjectQuotaRefusesBotRecordsPastIt writes a project's AuditEvents
// and jobs up to its quota: the write that would pass it fails with a
// QuotaError naming the usage and the limit, in the store's transaction;
// another project, and records that are not bot records, are unaffected.
func TestProjectQuotaRefusesBotRecordsPastIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	p := seedProject(t, s, "tenant")
	other := seedProject(t, s, "other")
	const quota = 20 << 10
	opts := PutOptions{TTL: time.Hour, ProjectQuota: quota}

	var stored int64
	refused := false
	for i := 0; i < 100 && !refused; i++ {
		before := usageOf(t, s, p.ID)
		err := s.Create(ctx, auditEvent(p.ID, 1000), opts)
		var qe *QuotaError
		switch {
		case errors.As(err, &qe):
			refused = true
			if !errors.Is(err, ErrQuotaExceeded) || qe.Limit != quota || qe.Used != before || qe.Project != p.ID {
				t.Fatalf("refusal %+v (%v), want project %s, used %d, limit %d", qe, err, p.ID, before, quota)
			}
			if qe.Frees.Before(time.Now().Add(time.Hour)) || qe.Frees.After(time.Now().Add(time.Hour+25*time.Hour)) {
				t.Errorf("space frees at %v, want within a day after the records' hour", qe.Frees)
			}
			if got := usageOf(t, s, p.ID); got != before {
				t.Errorf("a refused write changed the usage: %d -> %d", before, got)
			}
		case err != nil:
			t.Fatal(err)
		default:
			after := usageOf(t, s, p.ID)
			if after-before < 1000 || after-before > 2000 {
				t.Fatalf("an AuditEvent of ~1.2 KB was charged %d bytes", after-before)
			}
			stored = after
		}
	}
	if !refused {
		t.Fatalf("100 AuditEvents of ~1 KiB fit a %d-byte quota", quota)
	}
	if stored > quota || stored < quota-2000 {
		t.Errorf("stopped at %d bytes, want just under %d", stored, quota)
	}
	job := &AsyncJob{Status: "accepted", Request: "http://x/fhir/R4/Bot/b/$execute"}
	job.Meta.Project = p.ID
	// The last AuditEvent was refused for about 1 KiB; a small job fits or
	// not, but a big one must not.
	job.Output = map[string]any{"big": strings.Repeat("y", 4000)}
	if err := s.Create(ctx, job, opts); !errors.Is(err, ErrQuotaExceeded) {
		t.Errorf("a 4 KB job past the quota: %v, want ErrQuotaExceeded", err)
	}
	// Without a quota the write goes through, and is counted.
	before := usageOf(t, s, p.ID)
	if err := s.Create(ctx, auditEvent(p.ID, 1000), PutOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if usageOf(t, s, p.ID) <= before {
		t.Errorf("a write without a quota was not counted")
	}
	if err := s.Create(ctx, auditEvent(other.ID, 1000), opts); err != nil {
		t.Errorf("another project's AuditEvent: %v", err)
	}
	if err := s.Create(ctx, &Login{base: Base{Meta: Meta{Project: p.ID}}, User: Reference{Reference: "User/u1"}}, opts); err != nil {
		t.Errorf("a Login of the project at its quota: %v", err)
	}
}

// TestCreateAllChargesTheWholeBatch: an audit batch over the quota is
// refused as a whole, a batch within it is charged in full (every event,
// of every project in it).
func TestCreateAllChargesTheWholeBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	batch := func(project string, n int) []Resource {
		rs := make([]Resource, n)
		for i := range rs {
			rs[i] = auditEvent(project, 500)
		}
		return rs
	}
	if err := s.CreateAll(ctx, append(batch("p1", 10), batch("p2", 5)...), PutOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	one := usageOf(t, s, "p2") / 5
	if got := usageOf(t, s, "p1"); got != 10*one {
		t.Errorf("p1 after 10 events: %d bytes, want 10 × %d", got, one)
	}
	err := s.CreateAll(ctx, batch("p1", 10), PutOptions{TTL: time.Hour, ProjectQuota: 15 * one})
	if !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("a batch taking p1 from 10 to 20 events' bytes past a 15-event quota: %v", err)
	}
	if got := usageOf(t, s, "p1"); got != 10*one {
		t.Errorf("p1 after the refused batch: %d, want %d", got, 10*one)
	}
	if n := len(mustSearchAudit(t, s, "p1")); n != 10 {
		t.Errorf("p1 has %d AuditEvents after the refused batch, want 10", n)
	}
}

func mustSearchAudit(t *testing.T, s *Store, project string) []*AuditEvent {
	t.Helper()
	evs, err := Search[AuditEvent](context.Background(), s, Filter{Project: project, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestBotRecordUsageIsExactUnderConcurrentWriters: many writers charging
// one project at once (grouped creates, single puts and batches, which
// conflict on the project's bucket and are retried) end with exactly the
// sum of what they wrote.
func TestBotRecordUsageIsExactUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	if err := s.Create(ctx, auditEvent("p", 700), PutOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	one := usageOf(t, s, "p")
	const writers, each = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var err error
				switch (w + i) % 3 {
				case 0:
					err = s.Create(ctx, auditEvent("p", 700), PutOptions{TTL: time.Hour})
				case 1:
					ev := auditEvent("p", 700)
					ev.ID = newID()
					_, err = s.Put(ctx, ev, PutOptions{TTL: time.Hour})
				default:
					err = s.CreateAll(ctx, []Resource{auditEvent("p", 700)}, PutOptions{TTL: time.Hour})
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, want := usageOf(t, s, "p"), (1+writers*each)*one; got != want {
		t.Errorf("usage %d after %d equal writes of %d bytes, want %d", got, 1+writers*each, one, want)
	}
}

// TestBotRecordUsageSurvivesReopening: the usage is in the store, so a
// restart neither forgets it nor lets the project past its quota.
func TestBotRecordUsageSurvivesReopening(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	kv := openTestKVIn(t, dir)
	s := New(kv, Options{})
	for range 5 {
		if err := s.Create(ctx, auditEvent("p", 900), PutOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	used := usageOf(t, s, "p")
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	kv = openTestKVIn(t, dir)
	s = New(kv, Options{})
	if got := usageOf(t, s, "p"); got != used {
		t.Fatalf("usage after reopening: %d, want %d", got, used)
	}
	if err := s.Create(ctx, auditEvent("p", 900), PutOptions{TTL: time.Hour, ProjectQuota: used + 100}); !errors.Is(err, ErrQuotaExceeded) {
		t.Errorf("after reopening, a write past the quota: %v", err)
	}
}

// TestBotRecordUsageExpiresWithTheRecords: records expire silently, and
// their bucket with them, so the usage falls back and the project may
// write again. Buckets are a second wide here instead of a day; the wait
// polls for up to 15 s (Badger's TTLs have second granularity).
func TestBotRecordUsageExpiresWithTheRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	s.usageBucket = time.Second
	opts := PutOptions{TTL: time.Second, ProjectQuota: 4000}
	if err := s.Create(ctx, auditEvent("p", 2000), opts); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, auditEvent("p", 2000), opts); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("a second 2 KB event under a 4 KB quota: %v", err)
	}
	if err := s.Create(ctx, auditEvent("p", 100), PutOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	longLived := usageOf(t, s, "p")
	deadline := time.Now().Add(15 * time.Second)
	for usageOf(t, s, "p") == longLived {
		if time.Now().After(deadline) {
			t.Fatalf("usage still %d 15 s after a 1 s record expired", longLived)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := usageOf(t, s, "p"); got <= 0 || got >= 2000 {
		t.Errorf("usage after the 2 KB record expired: %d, want the small hour-long record's only", got)
	}
	if err := s.Create(ctx, auditEvent("p", 2000), opts); err != nil {
		t.Errorf("writing again once the space came back: %v", err)
	}
}

// lowDiskKV reports a fixed free space for a real Badger store.
type lowDiskKV struct {
	KV
	free uint64
}

func (k lowDiskKV) FreeSpace() (uint64, error) { return k.free, nil }

// TestDiskReserveRefusesWritesBelowIt: a write that asks for a reserve is
// refused with ErrUnwritable when the storage has less free space, before
// anything is written; writes asking for a smaller reserve (or none) go
// through, so sign-ins outlive bot records on a filling disk.
func TestDiskReserveRefusesWritesBelowIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kv, _ := openTestKV(t)
	s := New(lowDiskKV{KV: kv, free: 100 << 20}, Options{})
	bulk := PutOptions{TTL: time.Hour, DiskReserve: 256 << 20}
	if err := s.Create(ctx, auditEvent("p", 10), bulk); !errors.Is(err, ErrUnwritable) || !strings.Contains(err.Error(), "100 MiB free") {
		t.Errorf("Create below the reserve: %v", err)
	}
	if err := s.CreateAll(ctx, []Resource{auditEvent("p", 10)}, bulk); !errors.Is(err, ErrUnwritable) {
		t.Errorf("CreateAll below the reserve: %v", err)
	}
	ev := auditEvent("p", 10)
	ev.ID = newID()
	if _, err := s.Put(ctx, ev, bulk); !errors.Is(err, ErrUnwritable) {
		t.Errorf("Put below the reserve: %v", err)
	}
	if n := usageOf(t, s, "p"); n != 0 {
		t.Errorf("refused writes were charged %d bytes", n)
	}
	if err := s.Create(ctx, &Login{User: Reference{Reference: "User/u1"}}, PutOptions{TTL: time.Hour}); err != nil {
		t.Errorf("a Login with no reserve of its own: %v", err)
	}
	if err := s.Create(ctx, auditEvent("p", 10), PutOptions{TTL: time.Hour, DiskReserve: 64 << 20}); err != nil {
		t.Errorf("a write asking for less than is free: %v", err)
	}
}

// TestBadgerFreeSpaceReadsTheFilesystem: the real store reports the free
// space of its directory's filesystem.
func TestBadgerFreeSpaceReadsTheFilesystem(t *testing.T) {
	t.Parallel()
	kv, _ := openTestKV(t)
	free, err := kv.(FreeSpacer).FreeSpace()
	if err != nil || free == 0 {
		t.Fatalf("FreeSpace = %d, %v", free, err)
	}
	if runtime.GOOS != "linux" { // no statfs: reported as unlimited
		return
	}
	if err := New(kv, Options{}).Create(context.Background(), auditEvent("p", 10), PutOptions{DiskReserve: free * 4}); !errors.Is(err, ErrUnwritable) {
		t.Errorf("a write asking for 4× the free space: %v", err)
	}
}

//go:build unix

package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/fhirgate/fhirgate/internal/cputest"
)

// BenchmarkRecordIDs writes what a busy gateway writes (batches of Logins and
// AuditEvents, as the audit writer and grouped creates commit them) with
// random and with time-ordered ids, and reports the process CPU per record
// including Badger's background compaction, the table bytes per record and
// the live heap left after the writes.
// Compaction only shows at volume: run with -benchtime=1200x (307k records).
func BenchmarkRecordIDs(b *testing.B) {
	for _, tc := range []struct {
		name string
		id   func() string
	}{
		{"random-v4", uuid.NewString},
		{"time-ordered-v7", newID},
	} {
		b.Run(tc.name, func(b *testing.B) {
			saved := newID
			newID = tc.id
			defer func() { newID = saved }()
			kv, dir := openTestKV(b)
			s := New(kv, Options{})
			ctx := context.Background()
			p := seedProject(b, s, "p")
			u := seedUser(b, s, "user@example.org")
			bot := seedBot(b, s, p, "echo")
			console := strings.Repeat("line of bot console output\n", 8)
			const pairs = 128
			start := cputest.Process(b)
			b.ResetTimer()
			for range b.N {
				rs := make([]Resource, 0, 2*pairs)
				for range pairs {
					rs = append(rs,
						&AuditEvent{
							base:        Base{Meta: Meta{Project: p.ID}},
							Type:        Coding{Code: "execute"},
							Outcome:     "0",
							OutcomeDesc: console,
							Recorded:    FormatTime(time.Now()),
							Entity:      []AuditEventEntity{{What: Reference{Reference: "Bot/" + bot.ID}}},
						},
						&Login{base: Base{Meta: Meta{Project: p.ID}}, User: Reference{Reference: "User/" + u.ID}, Scope: "openid offline"})
				}
				if err := s.CreateAll(ctx, rs, PutOptions{TTL: time.Hour}); err != nil {
					b.Fatalf("writing batch: %v", err)
				}
			}
			b.StopTimer()
			records := float64(b.N * 2 * pairs)
			b.ReportMetric(float64((cputest.Process(b)-start).Microseconds())/records, "cpu-µs/record")
			b.ReportMetric(float64(diskBytes(b, dir, ".sst"))/records, "table-B/record")
			b.ReportMetric(float64(diskBytes(b, dir, ".vlog"))/records, "vlog-B/record")
			// What Badger keeps on the heap after the writes: mostly its
			// pooled table-build buffers (see badgerOptions).
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-MiB")
		})
	}
}

// diskBytes sums the disk space taken by Badger's files in dir whose name
// ends in ext: allocated blocks, since value-log files are created sparse at
// their full size.
func diskBytes(b *testing.B, dir, ext string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatalf("reading %s: %v", dir, err)
	}
	var n int64
	for _, e := range ents {
		if filepath.Ext(e.Name()) != ext {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // compaction removed it since ReadDir
		}
		if err != nil {
			b.Fatalf("stat %s: %v", e.Name(), err)
		}
		n += fi.Sys().(*syscall.Stat_t).Blocks * 512
	}
	return n
}

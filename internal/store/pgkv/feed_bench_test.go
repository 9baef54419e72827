package pgkv

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// BenchmarkChangeVisibility measures the change feed's staleness: from a
// write returning on replica A to replica B's change counter moving, which
// is when B's caches drop what the write made stale. It reports the median
// and the 99th percentile (the contract: within 1 s).
//
//	go test ./internal/store/pgkv -run '^$' -bench ChangeVisibility -benchtime 500x
func BenchmarkChangeVisibility(b *testing.B) {
	ctx := context.Background()
	dsn := pgkvtest.DSN(b)
	ra, rb := openReplica(b, dsn), openReplica(b, dsn)
	p := &store.Project{Name: "p"}
	if err := ra.st.Create(ctx, p, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	eventually(b, "B seeing the project", func() bool { return rb.st.RecordChanges("Project", p.ID) != 0 })
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		before := rb.st.RecordChanges("Project", p.ID)
		if _, err := ra.st.Put(ctx, p, store.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		written := time.Now()
		for rb.st.RecordChanges("Project", p.ID) == before {
			if time.Since(written) > feedWait {
				b.Fatalf("B did not see the write within %v", feedWait)
			}
			time.Sleep(20 * time.Microsecond)
		}
		lat = append(lat, time.Since(written))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

//go:build unix

package botapi

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/cputest"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// BenchmarkAuditWrite is the AuditEvent of one run alone, as a gateway
// writes it: built by auditEntry, queued to the audit writer and written in
// batches into a real Badger store with the gateway's default retention and
// a project quota. cpu-µs/op is the process's CPU per event with the queue
// drained at the end, Badger's background work included.
//
// "saturated" queues events as fast as the writer takes them, so every
// batch is full; "2000/s" queues them at a bot-run rate the harness sees on
// a busy 2-CPU machine, so the batches are as large as auditLinger lets them
// grow and each transaction's disk syncs are shared by fewer events.
func BenchmarkAuditWrite(b *testing.B) {
	b.Run("saturated", func(b *testing.B) { benchmarkAuditWrite(b, 0, "") })
	b.Run("2000/s", func(b *testing.B) { benchmarkAuditWrite(b, 2000, "") })
	// The same pacing with auditEventTrigger never: the process's CPU
	// without the events, to subtract from 2000/s.
	b.Run("2000/s-never", func(b *testing.B) { benchmarkAuditWrite(b, 2000, "never") })
}

// benchmarkAuditWrite queues b.N events, perSecond of them a second (in
// bursts every 10 ms), or as fast as they are taken when perSecond is 0.
func benchmarkAuditWrite(b *testing.B, perSecond int, trigger string) {
	ctx := context.Background()
	st := storetest.Open(b)
	project := &store.Project{Name: "bench"}
	if err := st.Create(ctx, project, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	bot := &store.Bot{Name: "echo", AuditEventTrigger: trigger}
	bot.Meta.Project = project.ID
	if err := st.Create(ctx, bot, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	id := &oauth.Identity{ProjectID: project.ID, Profile: "Practitioner/0190b3c2-7a1e-7c3d-9f00-000000000001"}
	res := &botrunner.Result{Outcome: botrunner.OutcomeSuccess, Duration: 300 * time.Microsecond}
	o := Options{AuditRetention: 30 * 24 * time.Hour, ProjectRecordsMax: 1 << 40}
	w := newAuditWriter(st, o.recordOptions(o.AuditRetention), zap.NewNop(), func(string) {})
	const trace = "0190b3c2-7a1e-7c3d-9f00-00000000beef"
	before := cputest.Process(b)
	b.ReportAllocs()
	b.ResetTimer()
	burst, tick := 1, time.Duration(0)
	if perSecond > 0 {
		tick = 10 * time.Millisecond
		burst = perSecond / 100
	}
	next := time.Now()
	for i := 0; b.Loop(); i++ {
		if tick > 0 && i%burst == 0 {
			next = next.Add(tick)
			time.Sleep(time.Until(next))
		}
		w.record(auditEntry(bot, "Bot/"+bot.ID, id, res, trace, time.Now()))
	}
	w.close()
	b.StopTimer()
	b.ReportMetric(float64((cputest.Process(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
}

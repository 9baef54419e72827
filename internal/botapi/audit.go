package botapi

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// auditBatch bounds how many events one transaction writes; a full batch
// must fit in one store transaction (TestFullAuditBatchFitsOneTransaction).
const auditBatch = 512

// auditLinger is how long the writer waits for a batch to fill once it has
// an event. Every transaction syncs the value log and the memtable's log,
// and on this kind of VM a sync costs milliseconds of CPU (the kernel
// write-protects each written page of the mapped logs, with a TLB
// shootdown per page), so the cost of an event falls with the size of its
// batch: at 2,000 events/s (BenchmarkAuditWrite/2000/s, less the same
// pacing without events) 72-89 µs of CPU per event with batches of up to
// 128 gathered for 25 ms, 54-58 µs with up to 512 for 250 ms. Nobody waits
// for an audit write, so the delay costs no run anything; a crash loses
// what is queued either way, now up to a quarter of a second of events.
const auditLinger = 250 * time.Millisecond

// auditWriter writes AuditEvents in the background, many per transaction,
// so a bot's response never waits for a disk sync and a burst of runs costs
// a few syncs rather than one each. Nobody waits for an event's sync
// either, so its batches are written Deferred: the writer goes on to the
// next batch at once, and the store syncs a batch with the next pass some
// other write waits for, or on Badger within a tenth of a second (at most
// ten passes a second when nobody waits). A process kill loses only what
// is queued; a machine crash loses that plus up to a tenth of a second of
// committed events. The queue is bounded: when the disk
// falls behind, record blocks, which slows callers down instead of losing
// events.
//
// An event the store refuses (its project is at its quota of bot records,
// the disk is down to the reserve, or any other error) is written to the
// log instead, at Warn, with its fields but without its console output.
type auditWriter struct {
	st        *store.Store
	put       store.PutOptions
	logger    *zap.Logger
	onRefused func(reason string)

	mu     sync.RWMutex // guards closed against record racing close
	closed bool
	queue  chan *store.AuditEvent
	done   chan struct{}
}

func newAuditWriter(st *store.Store, put store.PutOptions, logger *zap.Logger, onRefused func(reason string)) *auditWriter {
	put.Deferred = true
	w := &auditWriter{st: st, put: put, logger: logger, onRefused: onRefused,
		queue: make(chan *store.AuditEvent, 4096), done: make(chan struct{})}
	go w.loop()
	return w
}

// record queues an event; nil is ignored (the bot's trigger said no).
func (w *auditWriter) record(ev *store.AuditEvent) {
	if ev == nil {
		return
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		// A run that finished after shutdown began: write it directly.
		w.write([]store.Resource{ev})
		return
	}
	w.queue <- ev
}

// close writes what is queued and stops the writer.
func (w *auditWriter) close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	<-w.done
}

func (w *auditWriter) loop() {
	defer close(w.done)
	defer func() {
		if r := recover(); r != nil {
			w.logger.Error("audit writer panicked", zap.Any("panic", r))
		}
	}()
	batch := make([]store.Resource, 0, auditBatch)
	linger := time.NewTimer(auditLinger)
	defer linger.Stop()
	for ev := range w.queue {
		batch = append(batch[:0], ev)
		linger.Reset(auditLinger)
	fill:
		for len(batch) < auditBatch {
			select {
			case more, ok := <-w.queue:
				if !ok { // closing: write what there is now
					break fill
				}
				batch = append(batch, more)
			case <-linger.C:
				break fill
			}
		}
		w.write(batch)
	}
}

// write stores a batch in one transaction. If the batch as a whole is
// refused, each event is tried on its own so one bad event costs only
// itself.
func (w *auditWriter) write(batch []store.Resource) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.st.CreateAll(ctx, batch, w.put); err == nil {
		return
	}
	for _, ev := range batch {
		if err := w.st.Create(ctx, ev, w.put); err != nil {
			w.logInstead(ev.(*store.AuditEvent), err)
		}
	}
}

// logInstead writes a refused event to the log: every field but the
// console output and error message (outcomeDesc), which may carry what
// the bot handled.
func (w *auditWriter) logInstead(ev *store.AuditEvent, err error) {
	reason, level := "error", zap.ErrorLevel
	switch {
	case errors.Is(err, store.ErrQuotaExceeded):
		reason, level = "quota", zap.WarnLevel
	case errors.Is(err, store.ErrUnwritable):
		reason, level = "disk", zap.WarnLevel
	}
	if reason != "error" {
		w.onRefused(reason)
	}
	ce := w.logger.Check(level, "bot audit event logged instead of stored")
	if ce == nil {
		return
	}
	ce.Write(append([]zap.Field{zap.String("reason", reason), zap.Error(err)}, auditFields(ev)...)...)
}

// auditFields are the log fields of an event: every field but the console
// output and error message (outcomeDesc).
func auditFields(ev *store.AuditEvent) []zap.Field {
	fields := []zap.Field{
		zap.String("project", ev.Meta.Project),
		zap.String("type", ev.Type.Code),
		zap.String("outcome", ev.Outcome),
	}
	if len(ev.Entity) > 0 {
		fields = append(fields, zap.String("bot", ev.Entity[0].What.Reference), zap.String("bot_name", ev.Entity[0].What.Display))
	}
	if ev.Period != nil {
		fields = append(fields, zap.String("period_start", ev.Period.Start), zap.String("period_end", ev.Period.End))
	}
	for _, a := range ev.Agent {
		if a.Requestor {
			fields = append(fields, zap.String("requester", a.Who.Reference))
		}
	}
	for _, x := range ev.Extension {
		for _, e := range x.Extension {
			switch {
			case e.URL == "traceId":
				fields = append(fields, zap.String("trace_id", e.ValueID))
			case e.URL == "durationMs" && e.ValueInteger != nil:
				fields = append(fields, zap.Int64("duration_ms", *e.ValueInteger))
			case e.URL == "outcome":
				fields = append(fields, zap.String("run_outcome", e.ValueCode))
			}
		}
	}
	return fields
}

// auditEntry builds the AuditEvent of a run in Medplum's shape, or nil when
// the bot's auditEventTrigger says this run is not recorded. Its entities
// are the bot (botRef, "Bot/{id}"), then entity (what the run was about,
// such as the Subscription that triggered it).
func auditEntry(bot *store.Bot, botRef string, id *oauth.Identity, res *botrunner.Result, traceID string, started time.Time, entity ...store.Reference) *store.AuditEvent {
	if !audited(bot, res) {
		return nil
	}
	failed := res.Outcome != botrunner.OutcomeSuccess
	ref := store.Reference{Reference: botRef, Display: bot.Name}
	blk := &auditBlock{durationMs: res.Duration.Milliseconds()}
	blk.period = store.Period{Start: store.FormatTime(started), End: store.FormatTime(started.Add(res.QueueWait + res.Duration))}
	blk.tracing = [...]store.Extension{
		{URL: "traceId", ValueID: traceID},
		{URL: "durationMs", ValueInteger: &blk.durationMs},
		{URL: "outcome", ValueCode: res.Outcome.String()},
	}
	blk.extension[0] = store.Extension{URL: "https://medplum.com/fhir/StructureDefinition/tracing", Extension: blk.tracing[:]}
	blk.entity[0] = store.AuditEventEntity{What: ref}
	ev := &blk.ev
	*ev = store.AuditEvent{
		Type:        store.Coding{System: "https://medplum.com/CodeSystem/audit-event", Code: "execute"},
		Period:      &blk.period,
		Outcome:     "0",
		OutcomeDesc: consoleTail(res),
		Source:      store.AuditEventSource{Observer: ref},
		// Full slices: whoever appends (addFetches) copies, as before.
		Entity:    blk.entity[:1:1],
		Extension: blk.extension[:],
	}
	if len(entity) <= len(blk.entity)-1 {
		ev.Entity = blk.entity[: 1+len(entity) : 1+len(entity)]
		for i, e := range entity {
			ev.Entity[1+i] = store.AuditEventEntity{What: e}
		}
	} else {
		for _, e := range entity {
			ev.Entity = append(ev.Entity, store.AuditEventEntity{What: e})
		}
	}
	if failed {
		markFailed(ev, res)
	}
	if id.Profile != "" {
		blk.agent[0] = store.AuditEventAgent{Who: store.Reference{Reference: id.Profile}, Requestor: true}
		ev.Agent = blk.agent[:]
	}
	ev.Meta.Project = bot.Meta.Project
	return ev
}

// markFailed gives the event of a run that failed its outcome, and the
// runner's error message after the console output.
func markFailed(ev *store.AuditEvent, res *botrunner.Result) {
	ev.Outcome = "4"
	if res.Message != "" {
		ev.OutcomeDesc = appendLine(ev.OutcomeDesc, "Error: "+res.Message)
	}
}

// audited tells whether the bot's auditEventTrigger records a run that
// ended as res.
func audited(bot *store.Bot, res *botrunner.Result) bool {
	switch bot.AuditEventTrigger {
	case "never":
		return false
	case "on-error":
		return res.Outcome != botrunner.OutcomeSuccess
	case "on-output":
		return res.Console != ""
	}
	return true
}

// auditBlock is a run's AuditEvent with the parts it points to, allocated
// as one: an event is built for every run and stays queued for the audit
// writer up to auditLinger, and its eight separate allocations were a
// good part of a Subscription delivery's garbage (BenchmarkRunMessage).
// entity holds the bot and a Subscription run's two entities.
type auditBlock struct {
	ev         store.AuditEvent
	period     store.Period
	entity     [3]store.AuditEventEntity
	agent      [1]store.AuditEventAgent
	extension  [1]store.Extension
	tracing    [3]store.Extension
	durationMs int64
}

// consoleTail keeps the end of the console output, where errors are.
func consoleTail(res *botrunner.Result) string {
	s, truncated := res.Console, res.ConsoleTruncated
	if len(s) > auditTailBytes {
		// Cutting may split a character; drop the broken bytes.
		s = strings.ToValidUTF8(s[len(s)-auditTailBytes:], "")
		truncated = true
	}
	if truncated {
		s = "[earlier output truncated; last " + strconv.Itoa(len(s)) + " bytes kept]\n" + s
	}
	return s
}

func appendLine(s, line string) string {
	if s == "" || s[len(s)-1] == '\n' {
		return s + line
	}
	return s + "\n" + line
}

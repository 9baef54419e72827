package botapi

import (
	"context"
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
const auditBatch = 128

// auditLinger is how long the writer waits for a batch to fill once it has
// an event. Under load it turns many small transactions (two disk syncs
// each: the value log and the memtable) into few large ones: at thousands of
// runs a second the writes and their syncs were a seventh of the gateway's
// CPU at 1 ms, and the syncs still 3% of it at 10 ms (batches of ~60 at
// 6,000 runs/s); 25 ms fills a batch at 5,000 runs/s. Nobody waits for an
// audit write, so the delay costs nothing; a crash loses what is queued
// either way.
const auditLinger = 25 * time.Millisecond

// auditWriter writes AuditEvents in the background, many per transaction,
// so a bot's response never waits for a disk sync and a burst of runs costs
// a few syncs rather than one each. The queue is bounded: when the disk
// falls behind, record blocks, which slows callers down instead of losing
// events.
type auditWriter struct {
	st     *store.Store
	ttl    time.Duration
	logger *zap.Logger

	mu     sync.RWMutex // guards closed against record racing close
	closed bool
	queue  chan *store.AuditEvent
	done   chan struct{}
}

func newAuditWriter(st *store.Store, ttl time.Duration, logger *zap.Logger) *auditWriter {
	w := &auditWriter{st: st, ttl: ttl, logger: logger, queue: make(chan *store.AuditEvent, 4096), done: make(chan struct{})}
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
	if err := w.st.CreateAll(ctx, batch, store.PutOptions{TTL: w.ttl}); err == nil {
		return
	}
	for _, ev := range batch {
		if err := w.st.Create(ctx, ev, store.PutOptions{TTL: w.ttl}); err != nil {
			w.logger.Error("writing bot audit event", zap.Error(err))
		}
	}
}

// auditEntry builds the AuditEvent of a run in Medplum's shape, or nil when
// the bot's auditEventTrigger says this run is not recorded.
func auditEntry(bot *store.Bot, id *oauth.Identity, res *botrunner.Result, traceID string, started time.Time) *store.AuditEvent {
	failed := res.Outcome != botrunner.OutcomeSuccess
	switch bot.AuditEventTrigger {
	case "never":
		return nil
	case "on-error":
		if !failed {
			return nil
		}
	case "on-output":
		if res.Console == "" {
			return nil
		}
	}
	botRef := store.Reference{Reference: "Bot/" + bot.ID, Display: bot.Name}
	durationMs := res.Duration.Milliseconds()
	ev := &store.AuditEvent{
		Type:        store.Coding{System: "https://medplum.com/CodeSystem/audit-event", Code: "execute"},
		Period:      &store.Period{Start: store.FormatTime(started), End: store.FormatTime(started.Add(res.QueueWait + res.Duration))},
		Outcome:     "0",
		OutcomeDesc: consoleTail(res),
		Source:      store.AuditEventSource{Observer: botRef},
		Entity:      []store.AuditEventEntity{{What: botRef}},
		Extension: []store.Extension{{
			URL: "https://medplum.com/fhir/StructureDefinition/tracing",
			Extension: []store.Extension{
				{URL: "traceId", ValueID: traceID},
				{URL: "durationMs", ValueInteger: &durationMs},
				{URL: "outcome", ValueCode: res.Outcome.String()},
			},
		}},
	}
	if failed {
		ev.Outcome = "4"
		if res.Message != "" {
			ev.OutcomeDesc = appendLine(ev.OutcomeDesc, "Error: "+res.Message)
		}
	}
	if id.Profile != "" {
		ev.Agent = []store.AuditEventAgent{{Who: store.Reference{Reference: id.Profile}, Requestor: true}}
	}
	ev.Meta.Project = bot.Meta.Project
	return ev
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

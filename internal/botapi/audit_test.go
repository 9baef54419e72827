package botapi

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// TestFullAuditBatchFitsOneTransaction guards the pairing of auditBatch with
// the store's memtable size (Badger refuses a transaction over 15% of it):
// a full batch must commit as one transaction, not fall back to one write
// each, at every event size from 600 bytes to 1.1 KiB (an event under the
// store's value threshold sits in the transaction whole, a larger one as a
// value-log pointer: this holds should the threshold be raised again).
func TestFullAuditBatchFitsOneTransaction(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	bot := &store.Bot{Name: "importer"}
	bot.ID = "0190b3c2-7a1e-7c3d-9f00-1234567890ab"
	bot.Meta.Project = "0190b3c2-7a1e-7c3d-9f00-0000000000aa"
	id := &oauth.Identity{Profile: "Practitioner/0190b3c2-7a1e-7c3d-9f00-000000000001"}
	for target := 600; target <= 1100; target += 25 {
		batch := make([]store.Resource, auditBatch)
		for i := range batch {
			ev := auditEntry(bot, "Bot/"+bot.ID, id, &botrunner.Result{Outcome: botrunner.OutcomeSuccess, Duration: time.Millisecond}, "trace", time.Now())
			if pad := target - eventSize(t, ev); pad > 0 {
				ev.OutcomeDesc += strings.Repeat("x", pad)
			}
			batch[i] = ev
		}
		if err := st.CreateAll(context.Background(), batch, store.PutOptions{}); err != nil {
			t.Fatalf("a full batch of %d AuditEvents of %d bytes as one transaction: %v", auditBatch, target, err)
		}
	}
}

// eventSize is the size of ev's JSON as stored (with an id and meta).
func eventSize(t *testing.T, ev *store.AuditEvent) int {
	t.Helper()
	c := *ev
	c.ID = "0190b3c2-7a1e-7c3d-9f00-1234567890ab"
	c.Meta.VersionID = c.ID
	c.Meta.LastUpdated = store.FormatTime(time.Now())
	b, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestAuditEntryShape pins the AuditEvent of a run to Medplum's shape
// (createBotAuditEvent): type, period, outcome and its description, the bot
// as observer and entity, the requester as agent, and the tracing extension.
func TestAuditEntryShape(t *testing.T) {
	t.Parallel()
	bot := &store.Bot{Name: "importer"}
	bot.ID = "0190b3c2-7a1e-7c3d-9f00-1234567890ab"
	bot.Meta.Project = "0190b3c2-7a1e-7c3d-9f00-0000000000aa"
	id := &oauth.Identity{Profile: "Practitioner/0190b3c2-7a1e-7c3d-9f00-000000000001"}
	started := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	// event is the expected JSON; only the period's end, the outcome and the tracing values vary.
	event := func(end, outcome, desc string, ms int, code string) string {
		return `{"resourceType":"","meta":{"project":"0190b3c2-7a1e-7c3d-9f00-0000000000aa"},` +
			`"type":{"system":"https://medplum.com/CodeSystem/audit-event","code":"execute"},"recorded":"",` +
			`"period":{"start":"2026-11-21T10:00:00.000Z","end":"` + end + `"},"outcome":"` + outcome + `","outcomeDesc":` + strconv.Quote(desc) + `,` +
			`"agent":[{"who":{"reference":"Practitioner/0190b3c2-7a1e-7c3d-9f00-000000000001"},"requestor":true}],` +
			`"source":{"observer":{"reference":"Bot/0190b3c2-7a1e-7c3d-9f00-1234567890ab","display":"importer"}},` +
			`"entity":[{"what":{"reference":"Bot/0190b3c2-7a1e-7c3d-9f00-1234567890ab","display":"importer"}}],` +
			`"extension":[{"url":"https://medplum.com/fhir/StructureDefinition/tracing","extension":[` +
			`{"url":"traceId","valueId":"trace-1"},{"url":"durationMs","valueInteger":` + strconv.Itoa(ms) + `},{"url":"outcome","valueCode":"` + code + `"}]}]}`
	}
	tests := []struct {
		name string
		res  botrunner.Result
		want string
	}{
		{"success", botrunner.Result{Outcome: botrunner.OutcomeSuccess, Duration: 1500 * time.Millisecond, Console: "hello\n"},
			event("2026-11-21T10:00:01.500Z", "0", "hello\n", 1500, "success")},
		{"timeout", botrunner.Result{Outcome: botrunner.OutcomeTimeout, Message: "bot execution timed out after 1s", Duration: time.Second},
			event("2026-11-21T10:00:01.000Z", "4", "Error: bot execution timed out after 1s", 1000, "timeout")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(auditEntry(bot, "Bot/"+bot.ID, id, &tc.res, "trace-1", started))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("AuditEvent\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestAuditEntryMatchesSeparateAllocations checks auditEntry, which
// allocates an event and its parts as one block, against the event built
// part by part as it was before (plainAuditEntry): the same fields, the
// same JSON, for every trigger, outcome, requester and number of entities
// (more than the block holds included), and appending to its slices
// (addFetches) leaves the built event's other parts alone.
func TestAuditEntryMatchesSeparateAllocations(t *testing.T) {
	t.Parallel()
	started := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	results := []botrunner.Result{
		{Outcome: botrunner.OutcomeSuccess, Duration: 1500 * time.Millisecond, QueueWait: 3 * time.Millisecond},
		{Outcome: botrunner.OutcomeSuccess, Console: "hello\n"},
		{Outcome: botrunner.OutcomeError, Message: "boom", Console: "partial"},
		{Outcome: botrunner.OutcomeTimeout, Message: "timed out", Console: strings.Repeat("x", auditTailBytes+10)},
	}
	refs := []store.Reference{{Reference: "Subscription/s1"}, {Reference: "Patient/p1", Display: "P"}, {Reference: "Extra/e1"}, {Reference: "Extra/e2"}}
	for _, trigger := range []string{"", "always", "never", "on-error", "on-output"} {
		for ri := range results {
			for _, profile := range []string{"", "Practitioner/1"} {
				for n := 0; n <= len(refs); n++ {
					bot := &store.Bot{Name: "b<&>", AuditEventTrigger: trigger}
					bot.ID, bot.Meta.Project = "0190b3c2-7a1e-7c3d-9f00-1234567890ab", "proj"
					id := &oauth.Identity{Profile: profile}
					name := fmt.Sprintf("%s/%d/%q/%d", trigger, ri, profile, n)
					got := auditEntry(bot, "Bot/"+bot.ID, id, &results[ri], "trace", started, refs[:n]...)
					want := plainAuditEntry(bot, id, &results[ri], "trace", started, refs[:n]...)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("%s:\n got %+v\nwant %+v", name, got, want)
					}
					if got == nil {
						continue
					}
					gj, _ := json.Marshal(got)
					wj, _ := json.Marshal(want)
					if string(gj) != string(wj) {
						t.Fatalf("%s: JSON\n got %s\nwant %s", name, gj, wj)
					}
					got.Extension = append(got.Extension, store.Extension{URL: "appended"})
					got.Entity = append(got.Entity, store.AuditEventEntity{What: store.Reference{Reference: "Appended/1"}})
					got.Agent = append(got.Agent, store.AuditEventAgent{Who: store.Reference{Reference: "Appended/2"}})
					gj2, _ := json.Marshal(got)
					want.Extension = append(want.Extension, store.Extension{URL: "appended"})
					want.Entity = append(want.Entity, store.AuditEventEntity{What: store.Reference{Reference: "Appended/1"}})
					want.Agent = append(want.Agent, store.AuditEventAgent{Who: store.Reference{Reference: "Appended/2"}})
					wj2, _ := json.Marshal(want)
					if string(gj2) != string(wj2) {
						t.Fatalf("%s: after appends\n got %s\nwant %s", name, gj2, wj2)
					}
				}
			}
		}
	}
}

// plainAuditEntry is auditEntry as it was before its block allocation:
// the reference the block-allocated one must match.
func plainAuditEntry(bot *store.Bot, id *oauth.Identity, res *botrunner.Result, traceID string, started time.Time, entity ...store.Reference) *store.AuditEvent {
	if !audited(bot, res) {
		return nil
	}
	failed := res.Outcome != botrunner.OutcomeSuccess
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
	for _, e := range entity {
		ev.Entity = append(ev.Entity, store.AuditEventEntity{What: e})
	}
	if failed {
		markFailed(ev, res)
	}
	if id.Profile != "" {
		ev.Agent = []store.AuditEventAgent{{Who: store.Reference{Reference: id.Profile}, Requestor: true}}
	}
	ev.Meta.Project = bot.Meta.Project
	return ev
}

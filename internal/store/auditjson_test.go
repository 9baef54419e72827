package store

import (
	"bytes"
	"encoding/json"
	"testing"
)

// auditEventJSONCases are events that exercise every field of the
// encoder, each present and absent, and strings that need escaping.
func auditEventJSONCases() []*AuditEvent {
	yes, no := true, false
	n, neg := int64(42), int64(-7)
	full := &AuditEvent{
		Type:        Coding{System: "https://medplum.com/CodeSystem/audit-event", Version: "1", Code: "execute", Display: "Execute", UserSelected: &yes},
		Recorded:    "2026-11-26T03:00:00.000Z",
		Period:      &Period{Start: "2026-11-26T03:00:00.000Z", End: "2026-11-26T03:00:00.300Z"},
		Outcome:     "4",
		OutcomeDesc: "line 1\nline\t2 \"quoted\" <b>&amp;</b> \\ \x01\x1f\b\f\r é \u2028\u2029 \xff\xfe end",
		Agent: []AuditEventAgent{
			{Who: Reference{Reference: "Practitioner/1", Display: "Dr <One>"}, Requestor: true},
			{Who: Reference{Reference: "Device/2"}},
		},
		Source: AuditEventSource{Observer: Reference{Reference: "Bot/b1", Display: "echo"}},
		Entity: []AuditEventEntity{{What: Reference{Reference: "Bot/b1", Display: "echo"}}, {What: Reference{Reference: "Subscription/s1"}}},
		Extension: []Extension{{
			URL: "https://medplum.com/fhir/StructureDefinition/tracing",
			Extension: []Extension{
				{URL: "traceId", ValueID: "0190b3c2-7a1e-7c3d-9f00-00000000beef"},
				{URL: "durationMs", ValueInteger: &n},
				{URL: "negative", ValueInteger: &neg},
				{URL: "outcome", ValueCode: "success"},
			},
		}, {URL: "empty"}},
	}
	full.ResourceType = "AuditEvent"
	full.ID = "0190b3c2-7a1e-7c3d-9f00-000000000002"
	full.Meta = Meta{
		VersionID: "v1", LastUpdated: "2026-11-26T03:00:00.000Z", Project: "p1",
		Profile:  []string{"http://example.com/a", "http://example.com/b"},
		Security: []Coding{{System: "s", Code: "c"}, {UserSelected: &no}},
		Tag:      []Coding{{Display: "tag"}},
		Source:   "https://example.com/src",
	}
	sparse := &AuditEvent{Period: &Period{}}
	startOnly := &AuditEvent{Period: &Period{Start: "2026-11-26T03:00:00.000Z"}, Recorded: "x"}
	startOnly.Meta.Profile = []string{}
	endOnly := &AuditEvent{Period: &Period{End: "e"}, Agent: []AuditEventAgent{}, Entity: []AuditEventEntity{}, Extension: []Extension{}}
	endOnly.Meta.Source = "only source"
	return []*AuditEvent{full, {}, sparse, startOnly, endOnly}
}

func TestAuditEventJSONMatchesMarshal(t *testing.T) {
	for i, ev := range auditEventJSONCases() {
		checkAuditEventJSON(t, i, ev)
	}
}

// TestEncodedRecordOwnsItsBytes checks that a record does not share the
// pooled scratch encodeRecord writes in: a store transaction holds a
// record's bytes until it commits, while later records are encoded.
func TestEncodedRecordOwnsItsBytes(t *testing.T) {
	cases := auditEventJSONCases()
	held := make([][]byte, len(cases))
	for i, ev := range cases {
		b, err := encodeRecord(ev)
		if err != nil {
			t.Fatal(err)
		}
		held[i] = b
	}
	for i, ev := range cases {
		want, _ := json.Marshal(ev)
		if !bytes.Equal(held[i], want) {
			t.Fatalf("case %d changed after later encodes:\n got %s\nwant %s", i, held[i], want)
		}
	}
}

// TestEncodeRecordAllocatesOnlyTheRecord guards the exact-size copy: one
// allocation per event once the scratch is pooled.
func TestEncodeRecordAllocatesOnlyTheRecord(t *testing.T) {
	ev := auditEventJSONCases()[0]
	_, _ = encodeRecord(ev)
	if n := testing.AllocsPerRun(100, func() { _, _ = encodeRecord(ev) }); n > 1 {
		t.Fatalf("encodeRecord allocates %v times per event, want 1", n)
	}
}

func checkAuditEventJSON(t *testing.T, i int, ev *AuditEvent) {
	t.Helper()
	want, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := encodeRecord(ev)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("case %d:\n got %s\nwant %s", i, got, want)
	}
}

// FuzzAuditEventJSON checks the encoder against encoding/json for any
// strings in the fields a bot run fills, including invalid UTF-8.
func FuzzAuditEventJSON(f *testing.F) {
	f.Add("echo", "console output\n", "Practitioner/1", "trace", "", int64(3))
	f.Add("<b>", "\x00\x7f\xc3\x28 \u2028 \U0001F600", "a\"b\\c", "&", "p", int64(-1))
	f.Fuzz(func(t *testing.T, display, desc, who, trace, project string, n int64) {
		ev := &AuditEvent{
			Type:        Coding{Code: display},
			Recorded:    trace,
			Period:      &Period{Start: desc, End: who},
			Outcome:     project,
			OutcomeDesc: desc,
			Agent:       []AuditEventAgent{{Who: Reference{Reference: who, Display: display}, Requestor: n%2 == 0}},
			Source:      AuditEventSource{Observer: Reference{Reference: display, Display: who}},
			Entity:      []AuditEventEntity{{What: Reference{Reference: trace}}},
			Extension:   []Extension{{URL: display, Extension: []Extension{{URL: trace, ValueID: desc, ValueCode: who, ValueInteger: &n}}}},
		}
		ev.ID, ev.ResourceType = trace, display
		ev.Meta = Meta{VersionID: who, Project: project, Profile: []string{desc}, Tag: []Coding{{System: who}}, Source: display}
		checkAuditEventJSON(t, 0, ev)
	})
}

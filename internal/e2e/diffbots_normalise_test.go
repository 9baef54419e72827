package e2e

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// diffNormaliser rewrites what changes from run to run — UUIDs and the times of the runs
// themselves — so that two runs of a bot can be compared. Times outside the runs' window
// (the seed's, or ones a bot computes from fixed input) are kept: they must match.
type diffNormaliser struct {
	from, to time.Time
}

func newDiffNormaliser(from, to time.Time) *diffNormaliser {
	return &diffNormaliser{from: from.Add(-time.Minute), to: to.Add(time.Minute)}
}

var (
	uuidPattern  = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	isoPattern   = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	hl7TSPattern = regexp.MustCompile(`\b\d{14}(\.\d{1,4})?([+-]\d{4})?\b`)
)

// answer is a run's status and body, the body decoded when it is JSON. An HL7 answer's
// message control id (MSH-10) is generated (Medplum's buildAck uses the time in
// milliseconds), so it is replaced.
func (n *diffNormaliser) answer(r *diffRun) any {
	var body any
	if json.Unmarshal([]byte(r.Body), &body) != nil {
		body = hl7ControlID(r.Body)
	}
	return map[string]any{"status": float64(r.Status), "body": n.value(body)}
}

// hl7ControlID replaces MSH-10 of an HL7 v2 message.
func hl7ControlID(msg string) string {
	head, rest, found := strings.Cut(msg, "\r")
	if !strings.HasPrefix(head, "MSH|") {
		return msg
	}
	fields := strings.Split(head, "|")
	if len(fields) > 9 { // fields[0] is "MSH", fields[1] MSH-2: MSH-10 is fields[9]
		fields[9] = "<control-id>"
	}
	head = strings.Join(fields, "|")
	if found {
		return head + "\r" + rest
	}
	return head
}

// value normalises every string in a decoded JSON value.
func (n *diffNormaliser) value(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			out[k] = n.value(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = n.value(x)
		}
		return out
	case string:
		return n.text(v)
	}
	return v
}

func (n *diffNormaliser) text(s string) string {
	s = uuidPattern.ReplaceAllString(s, "<uuid>")
	s = isoPattern.ReplaceAllStringFunc(s, func(m string) string {
		if t, err := time.Parse(time.RFC3339Nano, m); err == nil && n.during(t, 0) {
			return "<now>"
		}
		return m
	})
	return hl7TSPattern.ReplaceAllStringFunc(s, func(m string) string {
		layout, slack := "20060102150405", 14*time.Hour // no zone: any zone's local time
		if len(m) > 14 && (m[len(m)-5] == '+' || m[len(m)-5] == '-') {
			layout, slack = layout+"-0700", 0
			if m[14] == '.' {
				layout = "20060102150405.999-0700"
			}
		} else if len(m) > 14 {
			layout = "20060102150405.999"
		}
		if t, err := time.Parse(layout, m); err == nil && n.during(t, slack) {
			return "<now>"
		}
		return m
	})
}

// during reports whether t falls in the runs' window, widened by slack either side.
func (n *diffNormaliser) during(t time.Time, slack time.Duration) bool {
	return !t.Before(n.from.Add(-slack)) && !t.After(n.to.Add(slack))
}

// TestDiffNormaliser pins what the differential suite treats as run-to-run noise: UUIDs,
// times during the runs (ISO and HL7, with or without a zone) and an HL7 answer's MSH-10 —
// and what it keeps, so that a wrong fixed date still shows.
func TestDiffNormaliser(t *testing.T) {
	from := time.Date(2026, 11, 25, 21, 0, 0, 0, time.UTC)
	n := newDiffNormaliser(from, from.Add(time.Minute))
	for in, want := range map[string]string{
		"id 01a2149b-2d02-737b-81a6-f2e457a79948":  "id <uuid>",
		"at 2026-11-25T21:00:30.123Z":              "at <now>",
		"at 2026-11-25T16:00:30-05:00":             "at <now>",
		"seeded 2026-02-01T09:00:00Z":              "seeded 2026-02-01T09:00:00Z",
		"MSH-7 20261125210030.652":                 "MSH-7 <now>",
		"MSH-7 20261125160030-0500":                "MSH-7 <now>",
		"OBX-14 20260302094500":                    "OBX-14 20260302094500",
		"Sunday, March 8 at 10:30 AM EDT (3/8/26)": "Sunday, March 8 at 10:30 AM EDT (3/8/26)",
	} {
		if got := n.text(in); got != want {
			t.Errorf("text(%q) = %q, want %q", in, got, want)
		}
	}
	ack := &diffRun{Status: 200, Body: "MSH|^~\\&|EHR|MEDPLUM|LAB|HOSP|20261125210030||ACK^R01^ACK|1795642061473|P|2.5.1\rMSA|AA|LAB7781|OK"}
	want := map[string]any{"status": float64(200),
		"body": "MSH|^~\\&|EHR|MEDPLUM|LAB|HOSP|<now>||ACK^R01^ACK|<control-id>|P|2.5.1\rMSA|AA|LAB7781|OK"}
	if got := n.answer(ack); !reflect.DeepEqual(got, want) {
		t.Errorf("answer(ack) = %v, want %v", got, want)
	}
}

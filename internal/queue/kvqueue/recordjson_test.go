package kvqueue

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/queue"
)

// recordJSONCases are records as the queue holds them: args as
// json.Marshal writes them, every optional field set or not, strings
// encoding/json escapes, and times with zones and nanoseconds.
func recordJSONCases() []*record {
	ny := time.FixedZone("x", -5*3600)
	return []*record{
		{},
		{ID: "0190b3c2-7a1e-7c3d-9f00-00000000a001", Kind: "subscription.trigger", Args: json.RawMessage(`{"route":"r","changes":[{"resource":{"a":"\u003cdiv\u003e \u0026"}}]}`),
			UniqueKey: "s|create|Patient/1|1|r", State: queue.StateAvailable, Attempt: 2, MaxAttempts: 10,
			RunAt: time.Date(2026, 11, 26, 8, 0, 0, 123456789, time.UTC), Rescued: true, LastError: "boom <&> \"quoted\"\n\x00 \u2028 \xff"},
		{ID: "id", Kind: "k", State: queue.StateRunning, Attempt: -1, MaxAttempts: 0, RunAt: time.Date(1, 1, 1, 0, 0, 0, 0, ny)},
		{ID: "id", Kind: "k", Args: json.RawMessage(`null`), State: queue.StateCompleted, RunAt: time.Now()},
		{ID: "é", Kind: "k", Args: json.RawMessage(`[1,2.5e3,"x",true,{}]`), State: queue.StateDiscarded, RunAt: time.Date(9999, 12, 31, 23, 59, 59, 1000, ny)},
	}
}

func TestRecordJSONMatchesMarshal(t *testing.T) {
	for i, r := range recordJSONCases() {
		checkRecordJSON(t, i, r)
	}
}

func checkRecordJSON(t *testing.T, i int, r *record) {
	t.Helper()
	want, werr := json.Marshal(r)
	got, err := encodeRecord(r)
	if (err != nil) != (werr != nil) || (err != nil && err.Error() != werr.Error()) {
		t.Fatalf("case %d: error %v, json.Marshal's %v", i, err, werr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("case %d:\n got %s\nwant %s", i, got, want)
	}
	// A record read back encodes the same: what a job enqueued by an
	// earlier version (json.Marshal) or by this one holds.
	if err == nil {
		var back record
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		wantBack, _ := json.Marshal(&back)
		if again, _ := encodeRecord(&back); !bytes.Equal(again, wantBack) {
			t.Fatalf("case %d read back:\n got %s\nwant %s", i, again, wantBack)
		}
	}
}

// TestNewRecordArgsAreCompactedAsMarshalDoes: args as a caller may give
// them (spaces, characters encoding/json escapes, not JSON at all) are
// stored as json.Marshal stored them, or refused with its error, and the
// record keeps the compacted args.
func TestNewRecordArgsAreCompactedAsMarshalDoes(t *testing.T) {
	for i, args := range []string{
		`{ "a" : [ 1, 2 ] ,
		"b": "x" }`,
		`{"html": "<b>&amp;</b>", "sep": "` + "\u2028\u2029" + `"}`,
		` "plain" `,
		`{"a":`,
		`{"a":1} trailing`,
		`nonsense`,
	} {
		r := &record{ID: "id", Kind: "k", Args: json.RawMessage(args), State: queue.StateAvailable, RunAt: time.Now()}
		want, werr := json.Marshal(r)
		got, err := encodeNewRecord(r)
		if (err != nil) != (werr != nil) || (err != nil && err.Error() != werr.Error()) {
			t.Fatalf("args %d: error %v, json.Marshal's %v", i, err, werr)
		}
		if err != nil {
			if string(r.Args) != args {
				t.Fatalf("args %d: refused args changed to %s", i, r.Args)
			}
			continue
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("args %d:\n got %s\nwant %s", i, got, want)
		}
		compacted, _ := json.Marshal(json.RawMessage(args))
		if !bytes.Equal(r.Args, compacted) {
			t.Fatalf("args %d: the record keeps %s, want %s", i, r.Args, compacted)
		}
		// Encoding the record again (a claim) writes the same args.
		again, _ := encodeRecord(r)
		if !bytes.Equal(again, want) {
			t.Fatalf("args %d encoded again:\n got %s\nwant %s", i, again, want)
		}
	}
}

// TestEncodedRecordOwnsItsBytes: the store holds a record's bytes until
// its transaction commits, and a new record's args live on in the index,
// while later records are encoded in the pooled scratch.
func TestEncodedRecordOwnsItsBytes(t *testing.T) {
	cases := recordJSONCases()
	held := make([][]byte, len(cases))
	args := make([][]byte, len(cases))
	for i, r := range cases {
		c := *r
		b, err := encodeNewRecord(&c)
		if err != nil {
			t.Fatal(err)
		}
		held[i], args[i] = b, c.Args
	}
	for i, r := range cases {
		want, _ := json.Marshal(r)
		if !bytes.Equal(held[i], want) || !bytes.Equal(args[i], r.Args) {
			t.Fatalf("case %d changed after later encodes: %s (args %s)", i, held[i], args[i])
		}
	}
}

// FuzzRecordJSON checks the encoder against encoding/json for any
// strings and args, including invalid UTF-8 and invalid JSON.
func FuzzRecordJSON(f *testing.F) {
	f.Add("id", "kind", `{"a":1}`, "key", "err", int64(0), true)
	f.Add("<", "\x00\xff", " [1, \"<\u2028>\"] ", "", "\u2029", int64(1e18), false)
	f.Fuzz(func(t *testing.T, id, kind, args, unique, lastErr string, nanos int64, rescued bool) {
		r := &record{ID: id, Kind: kind, Args: json.RawMessage(args), UniqueKey: unique, State: queue.JobState(kind),
			Attempt: len(id), MaxAttempts: len(kind), RunAt: time.Unix(0, nanos).UTC(), Rescued: rescued, LastError: lastErr}
		want, werr := json.Marshal(r)
		got, err := encodeNewRecord(r)
		if (err != nil) != (werr != nil) {
			t.Fatalf("error %v, json.Marshal's %v", err, werr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
		if err == nil {
			checkRecordJSON(t, 0, r)
		}
	})
}

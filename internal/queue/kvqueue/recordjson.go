package kvqueue

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/fhirgate/fhirgate/internal/store"
)

// encodeRecord is json.Marshal(r), byte for byte (TestRecordJSONMatchesMarshal,
// FuzzRecordJSON), written without reflection and with its args copied as
// they are: a job is encoded when it is enqueued, claimed and retried, and
// for a Subscription trigger the args carry the resource written (about a
// kilobyte), which encoding/json scanned and compacted again each time,
// into a buffer it grew and then copied (BenchmarkDeliveryPath).
//
// r.Args must be as json.Marshal writes a RawMessage (compact, with <, >,
// & and U+2028/2029 escaped). Every record the queue holds has such args:
// enqueueTx's are set from encodeNewRecord's encoding, and a record read
// from the store holds what json.Marshal or this wrote.
func encodeRecord(r *record) ([]byte, error) {
	b, _, err := appendRecord(r, false)
	return b, err
}

// encodeNewRecord encodes a record whose args are as Enqueue's caller gave
// them: they are compacted as json.Marshal does (and refused with its error
// when they are not JSON), and r.Args becomes the compacted args, a slice of
// the encoding.
func encodeNewRecord(r *record) ([]byte, error) {
	b, args, err := appendRecord(r, true)
	if err == nil && len(r.Args) > 0 {
		r.Args = args
	}
	return b, err
}

// appendRecord encodes r, compacting its args when compact is set, and
// returns the encoding and the args within it. The encoding is written in
// a pooled buffer and gets an exact-size copy (store.AppendPooled): the
// store keeps the value until its transaction commits, and a new record's
// args live on in the queue's index.
func appendRecord(r *record, compact bool) ([]byte, json.RawMessage, error) {
	runAt, err := r.RunAt.MarshalJSON()
	if err != nil {
		_, err = json.Marshal(r) // its error, naming the field
		return nil, nil, err
	}
	argsAt, argsEnd := 0, 0
	var argsErr error
	out := store.AppendPooled(func(b []byte) []byte {
		b = append(b, `{"id":`...)
		b = store.AppendJSONString(b, r.ID)
		b = append(b, `,"kind":`...)
		b = store.AppendJSONString(b, r.Kind)
		if len(r.Args) > 0 {
			b = append(b, `,"args":`...)
			argsAt = len(b)
			if compact {
				if b, argsErr = appendCompact(b, r.Args); argsErr != nil {
					return b
				}
			} else {
				b = append(b, r.Args...)
			}
			argsEnd = len(b)
		}
		if r.UniqueKey != "" {
			b = append(b, `,"unique_key":`...)
			b = store.AppendJSONString(b, r.UniqueKey)
		}
		b = append(b, `,"state":`...)
		b = store.AppendJSONString(b, string(r.State))
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(r.Attempt), 10)
		b = append(b, `,"max_attempts":`...)
		b = strconv.AppendInt(b, int64(r.MaxAttempts), 10)
		b = append(b, `,"run_at":`...)
		b = append(b, runAt...)
		if r.Rescued {
			b = append(b, `,"rescued":true`...)
		}
		if r.LastError != "" {
			b = append(b, `,"last_error":`...)
			b = store.AppendJSONString(b, r.LastError)
		}
		return append(b, '}')
	})
	if argsErr != nil {
		_, err = json.Marshal(r) // its error for args that are not JSON
		return nil, nil, err
	}
	return out, out[argsAt:argsEnd:argsEnd], nil
}

// appendCompact appends args as json.Marshal writes a RawMessage. Without
// the characters it escapes, that is json.Compact's output; with them,
// json.Marshal's own.
func appendCompact(b, args []byte) ([]byte, error) {
	if mayEscape(args) {
		c, err := json.Marshal(json.RawMessage(args))
		if err != nil {
			return b, err
		}
		return append(b, c...), nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, args); err != nil {
		return b, err
	}
	return buf.Bytes(), nil
}

// mayEscape tells whether json.Marshal may escape some of args: <, > or &,
// or a byte that starts U+2028 or U+2029 (0xE2 starts all of U+2000 to
// U+2FFF: those are rare, and only take the slower way). A byte loop:
// bytes.ContainsAny with multi-byte characters to find decodes every rune,
// which made a new job's encoding slower than json.Marshal's.
func mayEscape(args []byte) bool {
	for _, c := range args {
		if c == '<' || c == '>' || c == '&' || c == 0xE2 {
			return true
		}
	}
	return false
}

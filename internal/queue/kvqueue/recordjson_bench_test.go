package kvqueue

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/gateway/gatewaytest"
	"github.com/fhirgate/fhirgate/internal/queue"
)

// BenchmarkRecordEncoding is the encoding of a Subscription trigger's job
// record, whose args carry a 1.1 KB Patient: "marshal" is json.Marshal, as
// every write of a record was; "claim" is encodeRecord, as a claim or a
// retry writes it; "enqueue" is encodeNewRecord, which compacts the
// caller's args once.
func BenchmarkRecordEncoding(b *testing.B) {
	patient := json.RawMessage(gatewaytest.Patient("0190b3c2-7a1e-7c3d-9f00-00000000a001"))
	args, err := json.Marshal(map[string]any{"route": "0190b3c2-7a1e-7c3d-9f00-00000000a002", "changes": []any{map[string]any{"resource": patient}}})
	if err != nil {
		b.Fatal(err)
	}
	r := &record{ID: newID(), Kind: "subscription.trigger", Args: args, State: queue.StateAvailable, MaxAttempts: 10, RunAt: time.Now()}
	for _, bc := range []struct {
		name   string
		encode func(*record) ([]byte, error)
	}{
		{"marshal", func(r *record) ([]byte, error) { return json.Marshal(r) }},
		{"claim", encodeRecord},
		{"enqueue", encodeNewRecord},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c := *r
				if _, err := bc.encode(&c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package mllp

import (
	"bytes"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/hl7"
)

// benchMessage is fhirgate-bench scenario 7's message.
const benchMessage = "MSH|^~\\&|LAB|NORTH|EHR|CLINIC|20260101120000||ORU^R01^ORU_R01|BENCH1|P|2.5.1\r" +
	"PID|1||123^^^MRN||DOE^JANE||19800101|F\r" +
	"OBR|1||LAB1|8867-4^Heart rate^LN\r" +
	"OBX|1|NM|8867-4^Heart rate^LN||72|/min|||||F"

// loopReader serves the same bytes forever, as a sender sending back to
// back.
type loopReader struct {
	b   []byte
	off int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.b[l.off:])
	l.off = (l.off + n) % len(l.b)
	return n, nil
}

// BenchmarkMessagePath is the MLLP handler's own work for one message,
// without the bot run: read the frame, parse it, read its modes and
// duplicate key, remember the answer, build the AA and frame it. It is
// what MLLP adds to a run that $execute does not pay.
func BenchmarkMessagePath(b *testing.B) {
	r := NewReader(&loopReader{b: AppendFrame(nil, []byte(benchMessage))}, 1<<20)
	dups := NewDuplicates(10*time.Minute, 100_000, 16<<20, nil)
	var out []byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		raw, _, err := r.Next()
		if err != nil {
			b.Fatal(err)
		}
		msg, err := hl7.ParseBytes(raw)
		if err != nil {
			b.Fatal(err)
		}
		_ = ModesOf(msg)
		msh := msg.Header()
		// A distinct control id per message, as the bench sends.
		key := msh.Field(3).String() + "\x00" + msh.Field(4).String() + "\x00" + strconv.Itoa(i)
		ack, _ := dups.Do(key, func() ([]byte, bool) {
			ack, err := Ack(msg, hl7.AA, "", "")
			return ack, err == nil
		})
		out = AppendFrame(out[:0], ack)
		if _, err := io.Discard.Write(out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDuplicates is the duplicate memory's bookkeeping for a new
// message, at its bound (every Do evicts one).
func BenchmarkDuplicates(b *testing.B) {
	dups := NewDuplicates(10*time.Minute, 100_000, 16<<20, nil)
	ack := bytes.Repeat([]byte("a"), 150)
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = "LAB\x00NORTH\x00" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		dups.Do(keys[i%len(keys)], func() ([]byte, bool) { return ack, true })
	}
}

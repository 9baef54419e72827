package botrunner

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPrepareInputChecksOnlyTheMediaType: what PrepareInput refuses does not depend on the
// body (415s, a malformed Content-Type); everything else waits for the run's slot.
func TestPrepareInputChecksOnlyTheMediaType(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		status                  int // 0: accepted, left unparsed
	}{
		{"unsupported type", "application/xml", "<a/>", http.StatusUnsupportedMediaType},
		{"unsupported charset", "text/plain; charset=latin1", "x", http.StatusUnsupportedMediaType},
		{"body without a type", "", "x", http.StatusUnsupportedMediaType},
		{"malformed type", "text/", "x", http.StatusBadRequest},
		{"bad JSON waits", MediaJSON, "{", 0},
		{"bad HL7 waits", MediaHL7, "PID|1", 0},
		{"repeated form field waits", MediaForm, "a=1&a=2", 0},
		{"bad UTF-8 waits", MediaText, "\xff", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := PrepareInput(tc.contentType, []byte(tc.body))
			var ierr *InputError
			switch {
			case tc.status == 0 && err != nil:
				t.Fatalf("PrepareInput refused what only parsing can tell: %v", err)
			case tc.status == 0 && !in.deferred:
				t.Fatalf("PrepareInput parsed the body: %+v", in)
			case tc.status != 0 && (!errors.As(err, &ierr) || ierr.Status != tc.status):
				t.Fatalf("PrepareInput = %v, want a %d", err, tc.status)
			}
		})
	}
}

// deferredCases are bodies that PrepareInput accepts and parsing refuses, with what the
// refusal says; and one that parses.
var deferredCases = []struct {
	name, contentType, body, message string
}{
	{"JSON", MediaJSON, `{"a":`, "invalid JSON"},
	{"HL7", MediaHL7, "PID|1||x", "MSH"},
	{"form", MediaForm, "a=1&a=2", "repeated"},
	{"FHIR", MediaFHIR, `{"resourceType":"NotAType"}`, "unknown resourceType"},
}

// checkDeferred runs each deferred case through ex and checks that a body that does not parse
// is an *InputError (a 400 naming the problem) and that one that parses reaches the bot.
func checkDeferred(t *testing.T, ex Executor) {
	t.Helper()
	prog := mustCompile(t, "index.js", `exports.handler = async (m, e) => typeof e.input === "string" ? e.input : JSON.stringify(e.input)`)
	for _, tc := range deferredCases {
		t.Run(tc.name, func(t *testing.T) {
			in, err := PrepareInput(tc.contentType, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			res, err := ex.Run(ctxT(t), Request{CacheKey: "deferred", Code: prog.JS, BotID: "b", Event: Event{Input: in}})
			var ierr *InputError
			if !errors.As(err, &ierr) || ierr.Status != http.StatusBadRequest || !strings.Contains(ierr.Message, tc.message) {
				t.Fatalf("Run = %v, %v; want a 400 InputError mentioning %q", res, err, tc.message)
			}
			if res != nil {
				t.Errorf("a run whose input did not parse has a result: %+v", res)
			}
		})
	}
	t.Run("parses", func(t *testing.T) {
		in, err := PrepareInput(MediaForm, []byte("a=1&b=%C3%A9"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := ex.Run(ctxT(t), Request{CacheKey: "deferred", Code: prog.JS, BotID: "b", Event: Event{Input: in}})
		if err != nil || res.Outcome != OutcomeSuccess || string(res.Body) != `{"a":"1","b":"é"}` {
			t.Fatalf("Run = %+v, %v", res, err)
		}
	})
}

func TestRunnerParsesDeferredInput(t *testing.T) { checkDeferred(t, New(Options{})) }

func TestPoolParsesDeferredInputInTheWorker(t *testing.T) {
	checkDeferred(t, newTestPool(t, PoolOptions{}))
}

// TestDeferredInputIsParsedOnlyWithASlot: with every slot taken, a body that would be refused
// is not even looked at — the run waits for its share first, and is told the runner is busy.
// Parsing before the slot is what let a flood of large bodies grow the gateway without bound.
func TestDeferredInputIsParsedOnlyWithASlot(t *testing.T) {
	for _, tc := range []struct {
		name string
		ex   func(t *testing.T) Executor
	}{
		{"in process", func(*testing.T) Executor {
			return New(Options{MaxConcurrent: 1, QueueTimeout: 50 * time.Millisecond})
		}},
		{"worker", func(t *testing.T) Executor {
			return newTestPool(t, PoolOptions{Options: Options{MaxConcurrent: 1, QueueTimeout: 50 * time.Millisecond}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := tc.ex(t)
			client := newBlockingClient()
			prog := mustCompile(t, "index.js", `exports.handler = async (m) => m.readResource("Patient", "p")`)
			held := make(chan error, 1)
			go func() {
				_, err := ex.Run(context.Background(), Request{CacheKey: "hold", Code: prog.JS, BotID: "hold", Medplum: client, Timeout: 10 * time.Second})
				held <- err
			}()
			<-client.entered
			in, err := PrepareInput(MediaJSON, []byte("{"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ex.Run(ctxT(t), Request{CacheKey: "bad", Code: prog.JS, BotID: "bad", Event: Event{Input: in}}); !errors.Is(err, ErrBusy) {
				t.Errorf("with no slot free, a body that does not parse got %v, want ErrBusy", err)
			}
			close(client.release)
			if err := <-held; err != nil {
				t.Fatal(err)
			}
		})
	}
}

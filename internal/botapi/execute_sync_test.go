package botapi

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/fhirgate/fhirgate/internal/store"
)

// TestExecuteFindsTheBot: $execute finds a bot by id or by identifier
// (with or without its system) within the caller's project, and answers
// each way of naming none, or several, with the status Medplum uses.
func TestExecuteFindsTheBot(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	code := func(name string) string { return `exports.handler = async () => '` + name + `';` }
	a := f.deployBot(t, &store.Bot{Name: "a", Identifier: []store.Identifier{{System: "https://a.example", Value: "shared"}, {System: "https://a.example", Value: "only-a"}}}, code("a"))
	f.deployBot(t, &store.Bot{Name: "b", Identifier: []store.Identifier{{System: "https://b.example", Value: "shared"}}}, code("b"))
	other := &store.Project{Name: "other"}
	f.mustCreate(t, other)
	theirs := &store.Bot{Name: "theirs", Identifier: []store.Identifier{{System: "https://t.example", Value: "theirs"}}}
	theirs.Meta.Project = other.ID
	f.mustCreate(t, theirs)

	tests := []struct {
		name, path string
		status     int
		body       string // the bot's answer, or text in the outcome
	}{
		{"by id", "/fhir/R4/Bot/" + a.ID + "/$execute", 200, "a"},
		{"by identifier value", "/fhir/R4/Bot/$execute?identifier=only-a", 200, "a"},
		{"by system and value", "/fhir/R4/Bot/$execute?identifier=https://b.example|shared", 200, "b"},
		{"value of two bots", "/fhir/R4/Bot/$execute?identifier=shared", 400, "matches several bots; give the system too"},
		{"no identifier", "/fhir/R4/Bot/$execute", 400, "Must specify bot ID or identifier."},
		{"identifier twice", "/fhir/R4/Bot/$execute?identifier=only-a&identifier=only-a", 400, "identifier given more than once"},
		{"empty identifier", "/fhir/R4/Bot/$execute?identifier=", 400, "identifier is empty"},
		{"unknown identifier", "/fhir/R4/Bot/$execute?identifier=nobody", 404, "no bot with identifier nobody"},
		{"another project's identifier", "/fhir/R4/Bot/$execute?identifier=https://t.example|theirs", 404, "no bot with identifier"},
		{"another project's id", "/fhir/R4/Bot/" + theirs.ID + "/$execute", 404, "Bot/" + theirs.ID + " not found"},
		{"unknown id", "/fhir/R4/Bot/0190b3c2-7a1e-7c3d-9f00-00000000dead/$execute", 404, "not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := f.serve(t, f.memberToken, http.MethodPost, tc.path, `{}`)
			if r.status != tc.status {
				t.Fatalf("%d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.status == 200 {
				if r.body != tc.body {
					t.Errorf("ran the bot answering %q, want %q", r.body, tc.body)
				}
				return
			}
			if got := outcomeText(t, r); !strings.Contains(got, tc.body) {
				t.Errorf("outcome %q does not say %q", got, tc.body)
			}
		})
	}
}

// TestExecuteEvent: what a synchronous run hands the bot and answers:
// GET's query as input, request headers without credentials, the trace id
// (the caller's when it is a UUID or a W3C traceparent, else a new UUID),
// and the bot's failure as a 400 carrying its message.
func TestExecuteEvent(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{MaxBody: 64})
	bot := f.deployBot(t, &store.Bot{Name: "event"}, `exports.handler = async (medplum, event) => {
  if (event.input && event.input.fail) throw new Error('asked to fail');
  return { input: event.input, headers: event.headers, trace: event.traceId, contentType: event.contentType || null };
};`)
	path := "/fhir/R4/Bot/" + bot.ID + "/$execute"

	r := f.serve(t, f.memberToken, http.MethodGet, path+"?ward=east&bed=4", "", "X-Custom", "one", "Cookie", "session=secret")
	if r.status != http.StatusOK {
		t.Fatalf("GET $execute: %d %s", r.status, r.body)
	}
	got := r.json(t)
	if in := asJSON(got["input"]); in != `{"bed":"4","ward":"east"}` {
		t.Errorf("GET input %s", in)
	}
	headers := got["headers"].(map[string]any)
	if headers["x-custom"] != "one" || headers["authorization"] != nil || headers["cookie"] != nil {
		t.Errorf("headers the bot saw: %v", headers)
	}
	if _, err := uuid.Parse(got["trace"].(string)); err != nil || r.header.Get("X-Trace-Id") != got["trace"] {
		t.Errorf("a new trace id: bot %v, answer %q", got["trace"], r.header.Get("X-Trace-Id"))
	}
	if r.header.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Errorf("answer headers: %v", r.header)
	}

	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct{ header, value, want string }{
		{"Traceparent", traceparent, traceparent},
		{"X-Trace-Id", "not-a-uuid", ""}, // a new one
	} {
		r := f.serve(t, f.memberToken, http.MethodPost, path, `{}`, tc.header, tc.value)
		trace, _ := r.json(t)["trace"].(string)
		switch {
		case tc.want != "" && trace != tc.want:
			t.Errorf("%s %q: trace %q", tc.header, tc.value, trace)
		case tc.want == "" && (trace == tc.value || uuid.Validate(trace) != nil):
			t.Errorf("%s %q: trace %q, want a new UUID", tc.header, tc.value, trace)
		}
	}

	if r := f.serve(t, f.memberToken, http.MethodPost, path, `{"fail":true}`); r.status != http.StatusBadRequest || !strings.Contains(r.body, "asked to fail") {
		t.Errorf("a failing bot: %d %s", r.status, r.body)
	}
	if r := f.serve(t, f.memberToken, http.MethodPost, path, `{"pad":"`+strings.Repeat("x", 64)+`"}`); r.status != http.StatusRequestEntityTooLarge ||
		!strings.Contains(outcomeText(t, r), "exceeds the 64-byte limit") {
		t.Errorf("a body over MaxBody: %d %s", r.status, r.body)
	}
}

// TestAuditEventTriggers: a bot's auditEventTrigger decides which runs
// are recorded (Medplum's always, never, on-error, on-output), and an
// event keeps the end of long console output, marked as truncated.
func TestAuditEventTriggers(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	// The bot logs when asked, and fails when asked.
	code := `exports.handler = async (medplum, event) => {
  if (event.input.log) console.log(event.input.log > 1 ? 'a'.repeat(event.input.log) + 'THE-END' : 'hello');
  if (event.input.fail) throw new Error('failed on purpose');
  return 'ok';
};`
	bots := map[string]*store.Bot{}
	for _, trigger := range []string{"", "never", "on-error", "on-output"} {
		bots[trigger] = f.deployBot(t, &store.Bot{Name: "trigger-" + trigger, AuditEventTrigger: trigger}, code)
	}
	inputs := []string{`{}`, `{"log":1}`, `{"fail":true}`}
	for _, bot := range bots {
		for _, in := range inputs {
			f.serve(t, f.adminToken, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", in)
		}
	}
	long := f.deployBot(t, &store.Bot{Name: "long"}, code)
	if r := f.serve(t, f.adminToken, http.MethodPost, "/fhir/R4/Bot/"+long.ID+"/$execute", `{"log":20000}`); r.status != http.StatusOK {
		t.Fatalf("long output: %d %s", r.status, r.body)
	}
	f.api.Shutdown()

	// Each recorded run as outcome:last line of its console output.
	for trigger, want := range map[string][]string{
		"":          {"0:", "0:hello", "4:Error: failed on purpose"},
		"never":     nil,
		"on-error":  {"4:Error: failed on purpose"},
		"on-output": {"0:hello", "4:Error: failed on purpose"}, // a failure writes its error to the console
	} {
		var got []string
		for _, ev := range f.auditEventsOf(t, bots[trigger].ID) {
			lines := strings.Split(strings.TrimSpace(ev.OutcomeDesc), "\n")
			got = append(got, ev.Outcome+":"+lines[len(lines)-1])
		}
		if !sameSet(got, want) {
			t.Errorf("trigger %q recorded %q, want %q", trigger, got, want)
		}
	}
	evs := f.auditEventsOf(t, long.ID)
	if len(evs) != 1 {
		t.Fatalf("%d AuditEvents of the long run", len(evs))
	}
	desc := evs[0].OutcomeDesc
	if !regexp.MustCompile(`^\[earlier output truncated; last \d+ bytes kept\]\n`).MatchString(desc) ||
		!strings.Contains(desc, "THE-END") || len(desc) > auditTailBytes+100 {
		t.Errorf("long output kept as %d bytes: %.80q … %q", len(desc), desc, desc[max(0, len(desc)-20):])
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestEventHeadersDropCredentials: the headers handed to a run are
// lower-cased, repeated values joined, and never the caller's
// credentials (the runner drops them too; this is the gateway's own
// guard, for any runner).
func TestEventHeadersDropCredentials(t *testing.T) {
	t.Parallel()
	got := eventHeaders(http.Header{
		"Authorization": {"Bearer secret"}, "Proxy-Authorization": {"Basic secret"}, "Cookie": {"session=secret"},
		"X-Ward": {"east", "west"}, "Content-Type": {"application/json"},
	})
	if asJSON(got) != `{"content-type":"application/json","x-ward":"east, west"}` {
		t.Errorf("eventHeaders = %s", asJSON(got))
	}
}

// TestEventHeaderNamesAreLowerCased: the names eventHeaders takes from
// its table of common ones are what strings.ToLower makes of them, as for
// any other name.
func TestEventHeaderNamesAreLowerCased(t *testing.T) {
	t.Parallel()
	h := http.Header{"X-Other-Name": {"v"}}
	for name := range lowerHeaderNames {
		h[name] = []string{"v"}
	}
	got := eventHeaders(h)
	if len(got) != len(h) {
		t.Fatalf("%d headers, want %d", len(got), len(h))
	}
	for name := range h {
		if _, ok := got[strings.ToLower(name)]; !ok {
			t.Errorf("%s is not seen as %s: %v", name, strings.ToLower(name), got)
		}
	}
}

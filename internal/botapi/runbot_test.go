package botapi

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/store"
)

// TestRunBotWithoutHTTP: runBot, the run function HTTP $execute and a bot's
// medplum.executeBot share, needs no request and no response writer: given
// an identity, a bot key and an input it finds the bot (by id or
// identifier), hands the bot its input, trace id and headers, counts the
// run and audits it; and it returns what to answer instead of a result as
// a *fhir.Error (unknown bot, no identifier, unsupported input).
func TestRunBotWithoutHTTP(t *testing.T) {
	var mu sync.Mutex
	var outcomes []string
	f := newAPIFixture(t, Options{OnExecute: func(outcome string, _, _ time.Duration) {
		mu.Lock()
		outcomes = append(outcomes, outcome)
		mu.Unlock()
	}})
	bot := f.deployBot(t, &store.Bot{Name: "echo", Identifier: []store.Identifier{{System: "https://ex.org/bots", Value: "echo"}}},
		`exports.handler = async (medplum, event) => ({ x: event.input.x, trace: event.traceId, ct: event.contentType, hdr: event.headers["x-caller"] || null });`)
	const trace = "0f4b8a2c-3d5e-4f6a-8b7c-9d0e1f2a3b4c"
	call := func(key botKey, contentType, body string) runCall {
		return runCall{id: f.admin, bot: key, contentType: contentType, body: []byte(body), traceID: trace,
			header: http.Header{"Content-Type": {contentType}, "X-Caller": {"run-function"}}}
	}
	ctx := context.Background()

	for _, key := range []botKey{{id: bot.ID}, {identifiers: []string{"https://ex.org/bots|echo"}}} {
		res, err := f.api.runBot(ctx, call(key, "application/json", `{"x":7}`))
		if err != nil {
			t.Fatalf("%+v: %v", key, err)
		}
		var got struct {
			X         int
			Trace, Ct string
			Hdr       *string
		}
		if json.Unmarshal(res.Body, &got) != nil || got.X != 7 || got.Trace != trace || got.Ct != "application/json" ||
			got.Hdr == nil || *got.Hdr != "run-function" || resultStatus(res) != http.StatusOK {
			t.Fatalf("%+v: result %s", key, res.Body)
		}
	}

	refused := []struct {
		name   string
		call   runCall
		status int
	}{
		{"unknown bot", call(botKey{id: "nope"}, "application/json", `{}`), http.StatusNotFound},
		{"no id, no identifier", call(botKey{}, "application/json", `{}`), http.StatusBadRequest},
		{"two identifiers", call(botKey{identifiers: []string{"a|b", "a|b"}}, "application/json", `{}`), http.StatusBadRequest},
		{"unsupported media type", call(botKey{id: bot.ID}, "image/png", `x`), http.StatusUnsupportedMediaType},
	}
	for _, tt := range refused {
		res, err := f.api.runBot(ctx, tt.call)
		if ferr := fhir.AsError(err); res != nil || ferr == nil || ferr.Status != tt.status {
			t.Errorf("%s: result %v, error %v, want a %d fhir.Error", tt.name, res, err, tt.status)
		}
	}

	f.api.Shutdown() // writes the queued AuditEvents
	mu.Lock()
	defer mu.Unlock()
	if len(outcomes) != 2 || outcomes[0] != "success" || outcomes[1] != "success" {
		t.Errorf("runs counted %v, want two successes (refused calls never ran)", outcomes)
	}
	if evs := f.auditEventsOf(t, bot.ID); len(evs) != 2 {
		t.Errorf("%d AuditEvents, want 2", len(evs))
	}
}

package botapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
)

// maxBotDepth bounds bots calling bots (medplum.executeBot), so a bot that
// calls itself ends with a clear error instead of exhausting the runner.
const maxBotDepth = 5

// depthKey carries how deep in bot-to-bot calls a run is.
type depthKey struct{}

// callsKey carries the request's callBudget to the runs it causes.
type callsKey struct{}

// callBudget counts the bot runs of one request: the run the request
// asked for and every bot-to-bot call below it, however deep or wide (a
// bot calling itself ten times per level would otherwise make 10^5 runs
// within the depth bound). The whole tree shares it: it travels in the
// context, which the runner hands back to the medplum client for calls
// from worker processes too, so they are counted here, in the gateway.
type callBudget struct {
	runs atomic.Int64
	max  int64
}

// callsOf returns the budget of the request ctx belongs to, or starts one
// (for a request's first run, which it counts).
func (a *API) callsOf(ctx context.Context) *callBudget {
	if b, ok := ctx.Value(callsKey{}).(*callBudget); ok {
		return b
	}
	b := &callBudget{max: int64(a.o.MaxCallsPerRequest)}
	b.runs.Store(1)
	return b
}

// medplumClient is what a bot's `medplum` argument calls: FHIR requests to
// the backend behind the gateway, made as the caller and carrying the run's
// trace id, so the backend's logs tie them to the bot run. Bot operations
// ($execute of another bot) are answered here, not by the backend.
type medplumClient struct {
	api     *API
	id      *oauth.Identity
	backend *gateway.Backend
	traceID string
	calls   *callBudget
	// fhirBase is the run's FHIR base URL, passed on to the bots it calls.
	fhirBase string
	// tokens are the access tokens the run was given (runtoken.go).
	tokens *runTokens
}

// Do implements botrunner.MedplumClient. A path that could leave the FHIR
// base at a decoding backend is answered 400 here whatever the runner
// checked, so the backend never sees it.
func (c medplumClient) Do(ctx context.Context, method, path string, query url.Values, body []byte, contentType string, header http.Header) (int, string, []byte, error) {
	if err := fhir.CheckBotPath(path); err != nil {
		return http.StatusBadRequest, fhir.ContentType, fhir.MarshalOutcome(http.StatusBadRequest, err.Error()), nil
	}
	if botID, ok := executePath(path); ok {
		return c.executeBot(ctx, botID, query, body, contentType)
	}
	if path == emailPath {
		return c.sendEmail(ctx, method, body)
	}
	if path == runTokenPath {
		return c.runToken(ctx)
	}
	h := header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	h.Set("X-Trace-Id", c.traceID)
	if tp, ok := childTraceparent(c.traceID); ok {
		h.Set("Traceparent", tp)
	}
	resp, err := c.backend.Do(ctx, method, path, query, body, h)
	if err != nil {
		return 0, "", nil, err
	}
	return resp.Status, resp.Header.Get("Content-Type"), resp.Body, nil
}

// executePath recognises Bot/{id}/$execute and Bot/$execute.
func executePath(path string) (botID string, ok bool) {
	parts := strings.Split(path, "/")
	switch {
	case len(parts) == 2 && parts[0] == "Bot" && parts[1] == "$execute":
		return "", true
	case len(parts) == 3 && parts[0] == "Bot" && parts[2] == "$execute":
		id, err := url.PathUnescape(parts[1])
		return id, err == nil
	}
	return "", false
}

// executeBot runs another bot of the caller's project for a bot, exactly as
// an HTTP $execute would (same lookup, input checks, limits, metrics and
// audit: the same runBot), with the same trace id, one level deeper, on the
// request's call budget.
func (c medplumClient) executeBot(ctx context.Context, botID string, query url.Values, body []byte, contentType string) (int, string, []byte, error) {
	depth, _ := ctx.Value(depthKey{}).(int)
	if depth >= maxBotDepth {
		out := fhir.MarshalOutcome(http.StatusBadRequest, fmt.Sprintf("bots may call bots at most %d deep", maxBotDepth))
		return http.StatusBadRequest, fhir.ContentType, out, nil
	}
	if c.calls.runs.Add(1) > c.calls.max {
		out := fhir.MarshalOutcome(http.StatusBadRequest, fmt.Sprintf(
			"bots may run at most %d times per request, counting the bot the request ran and every bot called from it (bot_max_calls_per_request)", c.calls.max))
		return http.StatusBadRequest, fhir.ContentType, out, nil
	}
	ctx = context.WithValue(ctx, depthKey{}, depth+1)
	ctx = context.WithValue(ctx, callsKey{}, c.calls)
	header := http.Header{"X-Trace-Id": {c.traceID}}
	if contentType != "" {
		header.Set("Content-Type", contentType)
	}
	call := runCall{
		id: c.id, backend: c.backend, bot: botKey{id: botID},
		contentType: contentType, body: body, header: header, traceID: c.traceID,
		fhirBase: c.fhirBase,
	}
	if botID == "" {
		call.bot.identifiers = query["identifier"]
	}
	res, err := c.runBot(ctx, call)
	if ferr := fhir.AsError(err); ferr != nil {
		out, _ := json.Marshal(ferr.Outcome()) // plain strings: cannot fail
		return ferr.Status, fhir.ContentType, out, nil
	}
	if err != nil {
		return 0, "", nil, err
	}
	return resultStatus(res), res.ContentType, res.Body, nil
}

// runBot bounds the body a bot sends as an HTTP request's is bounded
// (MaxBody), holds it while the run lasts, and runs the bot.
func (c medplumClient) runBot(ctx context.Context, call runCall) (*botrunner.Result, error) {
	if ferr := c.api.checkBodySize(len(call.body)); ferr != nil {
		return nil, ferr
	}
	defer c.api.bodies.hold(len(call.body))()
	return c.api.runBot(ctx, call)
}

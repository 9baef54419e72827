package botapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/deploy"
	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// execute runs a bot for an authenticated caller.
func (a *API) execute(w http.ResponseWriter, r *http.Request, id *oauth.Identity, be *gateway.Backend, botID string) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		fhir.WriteOutcome(w, http.StatusMethodNotAllowed, "$execute accepts GET and POST")
		return
	}
	ctx := r.Context()
	found, status, msg := a.findBot(ctx, r, id, botID)
	if found == nil {
		fhir.WriteOutcome(w, status, msg)
		return
	}
	bot := found.bot
	input, releaseBody, ierr := a.readInput(r)
	if ierr != nil {
		fhir.WriteOutcome(w, ierr.Status, ierr.Message, exprs(ierr.Expression)...)
		return
	}
	async := wantsAsync(r)
	if !async {
		defer releaseBody()
	}
	code, key, err := a.code.executable(ctx, a.o.Store, bot)
	if errors.Is(err, deploy.ErrNoCode) {
		fhir.WriteOutcome(w, http.StatusBadRequest, fmt.Sprintf("Bot/%s has no deployed code; deploy it with $deploy", bot.ID))
		return
	}
	if err != nil {
		a.o.Logger.Error("loading bot code", zap.String("bot", bot.ID), zap.Error(err))
		fhir.WriteOutcome(w, http.StatusInternalServerError, "loading the bot's code failed")
		return
	}
	traceID := traceIDOf(r)
	started := time.Now()
	req := botrunner.Request{
		CacheKey:      key,
		Code:          code,
		Filename:      bot.ExecutableCode.Title,
		Runtime:       cmp.Or(bot.RuntimeVersion, a.o.DefaultRuntime),
		BotID:         bot.ID,
		MaxConcurrent: bot.MaxConcurrent,
		Project:       id.ProjectID,
		User:          id.UserID,
		// A bot's medplum.executeBot runs on its caller's slot: the caller waits for it.
		InheritSlot: ctx.Value(depthKey{}) != nil,
		Event: botrunner.Event{
			Bot:         botrunner.Reference{Reference: "Bot/" + bot.ID, Display: bot.Name},
			ContentType: r.Header.Get("Content-Type"),
			Input:       input,
			Secrets:     found.secrets,
			TraceID:     traceID,
			Headers:     eventHeaders(r.Header),
		},
	}
	if bot.Timeout > 0 {
		req.Timeout = time.Duration(bot.Timeout) * time.Second
	}
	if id.Profile != "" {
		req.Event.Requester = &botrunner.Reference{Reference: id.Profile}
	}
	if be != nil {
		req.Medplum = medplumClient{api: a, id: id, backend: be, traceID: traceID, calls: a.callsOf(ctx)}
	}
	if async {
		accepted := a.startJob(w, r, id, func(ctx context.Context) *botrunner.Result {
			defer releaseBody()
			res, err := a.run(ctx, bot, id, req, traceID, time.Now())
			var ierr *botrunner.InputError
			if errors.As(err, &ierr) {
				// Parsed once the run holds a slot, so after the 202: the job fails
				// with the 400 the synchronous call answers.
				return &botrunner.Result{Outcome: botrunner.OutcomeError, Message: ierr.Message}
			}
			return res
		})
		if !accepted {
			releaseBody()
		}
		return
	}
	ctx, end := a.life.begin(ctx)
	defer end()
	res, err := a.run(ctx, bot, id, req, traceID, started)
	var badInput *botrunner.InputError
	if why, stopped := a.life.stoppedByShutdown(ctx); stopped {
		// 400, not 503: a client retries a 5xx, and the bot ran partly.
		fhir.WriteOutcome(w, http.StatusBadRequest, why)
		return
	}
	switch {
	case errors.As(err, &badInput):
		fhir.WriteOutcome(w, badInput.Status, badInput.Message, exprs(badInput.Expression)...)
		return
	case errors.Is(err, botrunner.ErrBusy):
		w.Header().Set("Retry-After", "1")
		fhir.WriteOutcome(w, http.StatusTooManyRequests, "too many bot runs in progress; retry shortly")
		return
	case err != nil:
		return // the caller went away; nobody is listening
	}
	status = http.StatusOK
	if res.Outcome != botrunner.OutcomeSuccess {
		status = http.StatusBadRequest
	}
	w.Header().Set("Content-Type", res.ContentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Trace-Id", traceID)
	w.WriteHeader(status)
	_, _ = w.Write(res.Body)
}

// run runs the bot, records metrics and the audit event. The error is the
// runner's (busy, or ctx ended); a run that happened is audited even if
// its caller went away.
func (a *API) run(ctx context.Context, bot *store.Bot, id *oauth.Identity, req botrunner.Request, traceID string, started time.Time) (*botrunner.Result, error) {
	res, err := a.o.Runner.Run(ctx, req)
	var ierr *botrunner.InputError
	if errors.As(err, &ierr) {
		return nil, err // no run: nothing to count or audit, as for input refused before the run
	}
	if res == nil {
		outcome := "cancelled"
		if errors.Is(err, botrunner.ErrBusy) {
			outcome = "busy"
		}
		a.o.OnExecute(outcome, 0, time.Since(started))
		return nil, err
	}
	a.o.OnExecute(res.Outcome.String(), res.Duration, res.QueueWait)
	a.audit.record(auditEntry(bot, id, res, traceID, started))
	return res, err
}

// findBot resolves the bot from the path id or the identifier parameter,
// within the caller's project only, with the secrets its run sees. On
// failure it returns the status and message to answer.
func (a *API) findBot(ctx context.Context, r *http.Request, id *oauth.Identity, botID string) (*resolvedBot, int, string) {
	k := botCacheKey{project: id.ProjectID, key: botID}
	if botID == "" {
		idents := r.URL.Query()["identifier"]
		switch {
		case len(idents) == 0:
			return nil, http.StatusBadRequest, "Must specify bot ID or identifier."
		case len(idents) > 1:
			return nil, http.StatusBadRequest, "identifier given more than once"
		case idents[0] == "":
			return nil, http.StatusBadRequest, "identifier is empty"
		}
		k.byIdentifier, k.key = true, idents[0]
	}
	changes := a.o.Store.Changes(botInputTypes...)
	if e := a.bots.get(k, changes); e != nil {
		return e, 0, ""
	}
	bot, status, msg := a.lookupBot(ctx, id, k)
	if bot == nil {
		return nil, status, msg
	}
	secrets, err := a.secrets(ctx, bot)
	if err != nil {
		a.o.Logger.Error("loading bot secrets", zap.String("bot", bot.ID), zap.Error(err))
		return nil, http.StatusInternalServerError, "loading the bot's secrets failed"
	}
	e := &resolvedBot{bot: bot, secrets: secrets, changes: changes}
	a.bots.put(k, e)
	return e, 0, ""
}

// lookupBot reads the bot k names from the store.
func (a *API) lookupBot(ctx context.Context, id *oauth.Identity, k botCacheKey) (*store.Bot, int, string) {
	if !k.byIdentifier {
		bot, err := store.Get[store.Bot](ctx, a.o.Store, k.key)
		if errors.Is(err, store.ErrNotFound) || (err == nil && bot.Meta.Project != id.ProjectID) {
			return nil, http.StatusNotFound, fmt.Sprintf("Bot/%s not found", k.key)
		}
		if err != nil {
			a.o.Logger.Error("loading bot", zap.String("bot", k.key), zap.Error(err))
			return nil, http.StatusInternalServerError, "loading the bot failed"
		}
		return bot, 0, ""
	}
	system, value, ok := strings.Cut(k.key, "|")
	if !ok {
		system, value = "", k.key
	}
	bot, err := a.o.Store.BotByIdentifier(ctx, id.ProjectID, system, value)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, http.StatusNotFound, fmt.Sprintf("no bot with identifier %s", k.key)
	case errors.Is(err, store.ErrConflict):
		return nil, http.StatusBadRequest, fmt.Sprintf("identifier %s matches several bots; give the system too", k.key)
	case err != nil:
		a.o.Logger.Error("finding bot by identifier", zap.Error(err))
		return nil, http.StatusInternalServerError, "finding the bot failed"
	}
	return bot, 0, ""
}

// readInput reads the request body (POST) or query (GET) for the bot's
// input, refusing bodies over MaxBody and media types the runner does not
// take. The body is left unparsed (botrunner.PrepareInput): the runner
// parses it once the run holds a slot — in the worker process under process
// isolation — so a flood of large bodies costs the gateway their bytes
// only, never the many times larger parsed form.
//
// The body counts as held (bodyMemory) until release is called, once the
// run has ended.
func (a *API) readInput(r *http.Request) (in botrunner.Input, release func(), _ *botrunner.InputError) {
	noop := func() {}
	if r.Method == http.MethodGet {
		in, err := botrunner.PrepareInput(botrunner.MediaForm, []byte(r.URL.RawQuery))
		return in, noop, asInputError(err)
	}
	body, err := readBody(r.Body, r.ContentLength, a.o.MaxBody)
	if err != nil {
		return botrunner.Input{}, noop, &botrunner.InputError{Status: http.StatusBadRequest, Message: "reading the request body failed"}
	}
	if int64(len(body)) > a.o.MaxBody {
		return botrunner.Input{}, noop, &botrunner.InputError{Status: http.StatusRequestEntityTooLarge,
			Message: fmt.Sprintf("the request body exceeds the %d-byte limit", a.o.MaxBody)}
	}
	in, err = botrunner.PrepareInput(r.Header.Get("Content-Type"), body)
	if err != nil {
		return botrunner.Input{}, noop, asInputError(err)
	}
	return in, a.bodies.hold(len(body)), nil
}

func asInputError(err error) *botrunner.InputError {
	if err == nil {
		return nil
	}
	var ierr *botrunner.InputError
	if errors.As(err, &ierr) {
		return ierr
	}
	return &botrunner.InputError{Status: http.StatusBadRequest, Message: err.Error()}
}

func exprs(e string) []string {
	if e == "" {
		return nil
	}
	return []string{e}
}

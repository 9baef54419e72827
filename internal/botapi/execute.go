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
	"github.com/fhirgate/fhirgate/internal/fhirstore"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// botKey names the bot a run asks for: its id, or, when the id is empty,
// the values of the identifier parameter (Bot/$execute?identifier=system|value).
type botKey struct {
	id          string
	identifiers []string
}

// runCall is one $execute, whoever asked for it: an HTTP request or a bot's
// medplum.executeBot.
type runCall struct {
	id *oauth.Identity
	// backend is how the bot's medplum client reaches the FHIR backend; nil
	// gives the bot no medplum client.
	backend *gateway.Backend
	bot     botKey
	// contentType and body are the bot's input, unparsed: a POST body, or
	// the query of a GET as a form.
	contentType string
	body        []byte
	// header holds the request headers the bot's event sees.
	header  http.Header
	traceID string
	// asBot says there is no caller (an MLLP message, a cron tick): the
	// bot is its own requester (Bot/{id}) and id only says the project.
	asBot bool
	// entity is what the AuditEvent names after the bot (Message.Entity).
	entity []store.Reference
	// fhirBase is the gateway's FHIR base URL the request came through,
	// absolute and ending in '/' (the bot's medplum.fhirUrl); "" when unknown.
	fhirBase string
}

// preparedRun is a run ready to start: its bot found, its input accepted,
// its code loaded.
type preparedRun struct {
	bot     *store.Bot
	botRef  string // "Bot/{id}"
	id      *oauth.Identity
	req     botrunner.Request
	traceID string
	started time.Time
	entity  []store.Reference
	// backend is the run's route to the FHIR backend (nil: none), where an
	// auditEventDestination "resource" writes the AuditEvent.
	backend *gateway.Backend
	fetch   *botrunner.HTTPFetcher // nil without egress
	tokens  *runTokens             // revoked when the run ends; nil without a medplum client
}

// execute answers an HTTP $execute: it reads the input off the request,
// runs the bot through runBot (or, with Prefer: respond-async, through an
// async job), and writes the result.
func (a *API) execute(w http.ResponseWriter, r *http.Request, id *oauth.Identity, be *gateway.Backend, base, botID string) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		fhir.WriteOutcome(w, http.StatusMethodNotAllowed, "$execute accepts GET and POST")
		return
	}
	call := runCall{id: id, backend: be, bot: botKey{id: botID}, header: r.Header, traceID: traceIDOf(r),
		fhirBase: fhirstore.BaseURL(r) + base + "/"}
	if botID == "" {
		call.bot.identifiers = r.URL.Query()["identifier"]
	}
	var releaseBody func()
	var ferr *fhir.Error
	call.contentType, call.body, releaseBody, ferr = a.readInput(r)
	if ferr != nil {
		fhir.WriteError(w, ferr)
		return
	}
	if wantsAsync(r) {
		p, ferr := a.prepare(r.Context(), call)
		if ferr != nil {
			releaseBody()
			fhir.WriteError(w, ferr)
			return
		}
		a.startJob(w, r, id, base, p, call, releaseBody)
		return
	}
	defer releaseBody()
	res, err := a.runBot(r.Context(), call)
	if ferr := fhir.AsError(err); ferr != nil {
		fhir.WriteError(w, ferr)
		return
	}
	if err != nil {
		return // the caller went away; nobody is listening
	}
	w.Header().Set("Content-Type", res.ContentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Trace-Id", call.traceID)
	w.WriteHeader(resultStatus(res))
	_, _ = w.Write(res.Body)
}

// resultStatus is the status a run's result is answered with: 200 for a
// success, 400 for a bot that threw, timed out or broke a limit.
func resultStatus(res *botrunner.Result) int {
	if res.Outcome != botrunner.OutcomeSuccess {
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// runBot runs a bot to its end for an HTTP $execute or a bot's
// medplum.executeBot alike: it finds the bot, checks its input, runs it
// within the API's lifecycle, and records metrics and the audit event. A
// *fhir.Error is the answer to give instead of a result (the bot or its
// code not found, input refused, runs busy, stopped by a shutdown); any
// other error means the caller went away.
func (a *API) runBot(ctx context.Context, call runCall) (*botrunner.Result, error) {
	var p preparedRun // on the stack: a run's is over 600 bytes
	if ferr := a.prepareInto(ctx, call, &p); ferr != nil {
		return nil, ferr
	}
	ctx, end := a.life.begin(ctx)
	defer end()
	res, err := a.run(ctx, &p)
	if why, stopped := a.life.stoppedByShutdown(ctx); stopped {
		// 400, not 503: a client retries a 5xx, and the bot ran partly.
		return nil, fhir.NewError(http.StatusBadRequest, why)
	}
	switch {
	case fhir.AsError(err) != nil:
		return nil, err
	case errors.Is(err, botrunner.ErrBusy):
		return nil, &fhir.Error{Status: http.StatusTooManyRequests, Message: "too many bot runs in progress; retry shortly", RetryAfter: time.Second}
	case err != nil:
		return nil, err
	}
	return res, nil
}

// prepare finds the bot call names, accepts its input (the media type;
// the body itself is parsed by the runner) and loads its code.
func (a *API) prepare(ctx context.Context, call runCall) (*preparedRun, *fhir.Error) {
	p := &preparedRun{}
	if ferr := a.prepareInto(ctx, call, p); ferr != nil {
		return nil, ferr
	}
	return p, nil
}

// prepareInto is prepare into p, which a run that ends before its caller
// returns (runBot) keeps on its stack.
func (a *API) prepareInto(ctx context.Context, call runCall, p *preparedRun) *fhir.Error {
	found, ferr := a.findBot(ctx, call.id, call.bot)
	if ferr != nil {
		return ferr
	}
	bot := found.bot
	input, err := botrunner.PrepareInput(call.contentType, call.body)
	if err != nil {
		return asInputError(err)
	}
	code, key, err := a.code.executable(ctx, a.o.Store, bot)
	if errors.Is(err, deploy.ErrNoCode) {
		return fhir.NewError(http.StatusBadRequest, fmt.Sprintf("Bot/%s has no deployed code; deploy it with $deploy", bot.ID))
	}
	if err != nil {
		a.o.Logger.Error("loading bot code", zap.String("bot", bot.ID), zap.Error(err))
		return fhir.NewError(http.StatusInternalServerError, "loading the bot's code failed")
	}
	// id is who asked for the run (event.requester, the AuditEvent's
	// agent, the fair share); runAs is whom its medplum calls act as.
	id, runAs := call.id, found.self
	if call.asBot {
		id = runAs
	}
	if bot.RunAsUser {
		runAs = id
	}
	if runAs.Profile == found.ref && found.member != nil && !found.member.IsActive() {
		return fhir.NewError(http.StatusForbidden, fmt.Sprintf("Bot/%s's membership is inactive: it cannot run as itself", bot.ID))
	}
	req := botrunner.Request{
		CacheKey:      key,
		Code:          code,
		Filename:      bot.ExecutableCode.Title,
		Runtime:       cmp.Or(bot.Runtime(), a.o.DefaultRuntime),
		BotID:         bot.ID,
		MaxConcurrent: bot.MaxConcurrent,
		Project:       id.ProjectID,
		User:          id.UserID,
		// A bot's medplum.executeBot runs on its caller's slot: the caller waits for it.
		InheritSlot: ctx.Value(depthKey{}) != nil,
		Event: botrunner.Event{
			Bot:         botrunner.Reference{Reference: found.ref, Display: bot.Name},
			ContentType: call.header.Get("Content-Type"),
			Input:       input,
			Secrets:     found.secrets,
			TraceID:     call.traceID,
			Headers:     eventHeaders(call.header),
		},
	}
	if bot.Timeout > 0 {
		req.Timeout = time.Duration(bot.Timeout) * time.Second
	}
	req.FHIRBaseURL = call.fhirBase
	if id.Profile != "" {
		req.Event.Requester = &botrunner.Reference{Reference: id.Profile}
	}
	be := a.backendFor(ctx, call.backend, runAs)
	*p = preparedRun{bot: bot, botRef: found.ref, id: id, req: req, traceID: call.traceID, started: time.Now(), entity: call.entity, backend: be, fetch: a.newFetcher(id.ProjectID)}
	if be != nil {
		p.tokens = newRunTokens(req.Timeout)
		p.req.Medplum = medplumClient{api: a, id: runAs, backend: be, traceID: call.traceID, calls: a.callsOf(ctx), fhirBase: call.fhirBase, tokens: p.tokens}
	}
	if p.fetch != nil {
		p.req.Fetch = p.fetch
	}
	return nil
}

// run runs a prepared bot, records metrics and the audit event. The error
// is the runner's (busy, input refused, or ctx ended); a run that happened
// is audited even if its caller went away.
func (a *API) run(ctx context.Context, p *preparedRun) (*botrunner.Result, error) {
	res, err := a.o.Runner.Run(ctx, p.req)
	p.tokens.revokeAll(ctx) // the run's access tokens end with it
	if fhir.AsError(err) != nil {
		return nil, err // no run: nothing to count or audit, as for input refused before the run
	}
	if res == nil {
		outcome := "cancelled"
		if errors.Is(err, botrunner.ErrBusy) {
			outcome = "busy"
		}
		a.o.OnExecute(outcome, 0, time.Since(p.started))
		return nil, err
	}
	a.o.OnExecute(res.Outcome.String(), res.Duration, res.QueueWait)
	ev := auditEntry(p.bot, p.botRef, p.id, res, p.traceID, p.started, p.entity...)
	addFetches(ev, p.fetch)
	a.sendAudit(ctx, p.bot, p.backend, ev)
	a.audit.record(ev)
	return res, err
}

// findBot resolves the bot from its id or identifier, within the
// caller's project only, with the secrets its run sees. On failure it
// returns the error to answer.
func (a *API) findBot(ctx context.Context, id *oauth.Identity, bk botKey) (*resolvedBot, *fhir.Error) {
	k := botCacheKey{project: id.ProjectID, key: bk.id}
	if bk.id == "" {
		switch {
		case len(bk.identifiers) == 0:
			return nil, fhir.NewError(http.StatusBadRequest, "Must specify bot ID or identifier.")
		case len(bk.identifiers) > 1:
			return nil, fhir.NewError(http.StatusBadRequest, "identifier given more than once")
		case bk.identifiers[0] == "":
			return nil, fhir.NewError(http.StatusBadRequest, "identifier is empty")
		}
		k.byIdentifier, k.key = true, bk.identifiers[0]
	}
	changes := a.o.Store.Changes(botInputTypes...)
	if e := a.bots.get(k, changes); e != nil {
		return e, nil
	}
	bot, ferr := a.lookupBot(ctx, id, k)
	if ferr != nil {
		return nil, ferr
	}
	secrets, err := a.secrets(ctx, bot)
	if err != nil {
		a.o.Logger.Error("loading bot secrets", zap.String("bot", bot.ID), zap.Error(err))
		return nil, fhir.NewError(http.StatusInternalServerError, "loading the bot's secrets failed")
	}
	member, err := botMembership(ctx, a.o.Store, bot)
	if err != nil {
		a.o.Logger.Error("loading bot membership", zap.String("bot", bot.ID), zap.Error(err))
		return nil, fhir.NewError(http.StatusInternalServerError, "loading the bot's membership failed")
	}
	e := &resolvedBot{bot: bot, ref: "Bot/" + bot.ID, self: botIdentity(bot, member), secrets: secrets, member: member, changes: changes}
	a.bots.put(k, e)
	return e, nil
}

// lookupBot reads the bot k names from the store.
func (a *API) lookupBot(ctx context.Context, id *oauth.Identity, k botCacheKey) (*store.Bot, *fhir.Error) {
	if !k.byIdentifier {
		bot, err := store.Get[store.Bot](ctx, a.o.Store, k.key)
		if errors.Is(err, store.ErrNotFound) || (err == nil && bot.Meta.Project != id.ProjectID) {
			return nil, fhir.NewError(http.StatusNotFound, fmt.Sprintf("Bot/%s not found", k.key))
		}
		if err != nil {
			a.o.Logger.Error("loading bot", zap.String("bot", k.key), zap.Error(err))
			return nil, fhir.NewError(http.StatusInternalServerError, "loading the bot failed")
		}
		return bot, nil
	}
	system, value, ok := strings.Cut(k.key, "|")
	if !ok {
		system, value = "", k.key
	}
	bot, err := a.o.Store.BotByIdentifier(ctx, id.ProjectID, system, value)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, fhir.NewError(http.StatusNotFound, fmt.Sprintf("no bot with identifier %s", k.key))
	case errors.Is(err, store.ErrConflict):
		return nil, fhir.NewError(http.StatusBadRequest, fmt.Sprintf("identifier %s matches several bots; give the system too", k.key))
	case err != nil:
		a.o.Logger.Error("finding bot by identifier", zap.Error(err))
		return nil, fhir.NewError(http.StatusInternalServerError, "finding the bot failed")
	}
	return bot, nil
}

// readInput reads a $execute's input off the request: the body (POST),
// refused over MaxBody, or the query (GET) as a form. The input is left
// unparsed: runBot checks its media type (botrunner.PrepareInput) and the
// runner parses it once the run holds a slot — in the worker process under
// process isolation — so a flood of large bodies costs the gateway their
// bytes only, never the many times larger parsed form.
//
// The body counts as held (bodyMemory) until release is called, once the
// run has ended.
func (a *API) readInput(r *http.Request) (contentType string, body []byte, release func(), _ *fhir.Error) {
	noop := func() {}
	if r.Method == http.MethodGet {
		return botrunner.MediaForm, []byte(r.URL.RawQuery), noop, nil
	}
	body, err := readBody(r.Body, r.ContentLength, a.o.MaxBody)
	if err != nil {
		return "", nil, noop, fhir.NewError(http.StatusBadRequest, "reading the request body failed")
	}
	if ferr := a.checkBodySize(len(body)); ferr != nil {
		return "", nil, noop, ferr
	}
	return r.Header.Get("Content-Type"), body, a.bodies.hold(len(body)), nil
}

// checkBodySize refuses an input body over MaxBody.
func (a *API) checkBodySize(n int) *fhir.Error {
	if int64(n) > a.o.MaxBody {
		return fhir.NewError(http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body exceeds the %d-byte limit", a.o.MaxBody))
	}
	return nil
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

package botapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
)

// An async $execute is a queue job: accepted on one replica, run by
// whichever takes it, through the request-less backend route
// (Options.Backends), so its bot reaches the backend exactly as it would
// have from the request. The AsyncJob record stays the client's view of it;
// the queue job is how the work gets done. A job whose runner died is
// delivered again marked Rescued, and is then marked failed, never run
// again (the bot may have done part of its work).

// AsyncKind is the job kind of async $execute runs.
const AsyncKind = "bot.async_execute"

// asyncAttempts bounds the deliveries of an async job: the first, the
// retries while its AsyncJob is not yet visible (enqueued first, written
// right after) or no configuration can run it (a reload in progress), and
// the rescued delivery that fails it.
const asyncAttempts = 10

// asyncTimeout bounds one delivery: the longest bot timeout and a wait
// for a run slot. On PostgreSQL, a job held longer than this is taken for
// a dead replica's and rescued, so this is also how long a dead replica's
// job can stay accepted.
const asyncTimeout = store.MaxBotTimeout*time.Second + time.Minute

// asyncArgs is an async run as the queue keeps it: everything the run
// needs, since the replica that runs it has no request. The caller's
// identity was authenticated and authorized when the job was accepted.
type asyncArgs struct {
	Job         string          `json:"job"`
	Route       string          `json:"route"`
	Caller      *oauth.Identity `json:"caller"`
	Bot         string          `json:"bot"`
	ContentType string          `json:"contentType,omitempty"`
	Body        []byte          `json:"body,omitempty"`
	// Header is what the bot's event.headers show, without credentials.
	Header  http.Header `json:"header,omitempty"`
	TraceID string      `json:"traceId"`
}

// errJobNotRecorded retries a delivery that came before its AsyncJob was
// written.
var errJobNotRecorded = errors.New("the async job is not recorded yet")

// RegisterJobs registers the bot API's job kinds on q (call it before q
// starts): AsyncKind, whose jobs run on the API apis returns for the
// job's Route — the configuration running now, which may be newer than
// the one that accepted the job. An error from apis retries the job; at
// its last attempt the job is failed with that error.
func RegisterJobs(q queue.Queue, st *store.Store, apis func(route string) (*API, error), logger *zap.Logger) error {
	if logger == nil {
		logger = zap.NewNop()
	}
	w := &asyncWorker{st: st, apis: apis, logger: logger}
	return q.Register(AsyncKind, w.deliver, queue.KindOptions{MaxAttempts: asyncAttempts, Timeout: asyncTimeout})
}

// asyncWorker runs AsyncKind deliveries.
type asyncWorker struct {
	st     *store.Store
	apis   func(route string) (*API, error)
	logger *zap.Logger
}

// deliver is the queue.Worker of AsyncKind.
func (w *asyncWorker) deliver(ctx context.Context, d *queue.Delivery) error {
	var args asyncArgs
	if err := json.Unmarshal(d.Args, &args); err != nil || args.Job == "" || args.Caller == nil {
		w.logger.Error("async bot job with unreadable arguments dropped", zap.String("queue_job", d.ID))
		return nil // nothing to retry: no attempt could read it
	}
	job, err := store.Get[store.AsyncJob](ctx, w.st, args.Job)
	switch {
	case errors.Is(err, store.ErrNotFound) && d.Attempt < d.MaxAttempts:
		return errJobNotRecorded
	case errors.Is(err, store.ErrNotFound):
		return nil // never written (the store refused it) or expired
	case err != nil:
		return err
	}
	if job.Status != jobAccepted {
		return nil // ended already (a delivery raced a rescue)
	}
	if d.Rescued {
		w.logger.Warn("async bot job's runner stopped before it finished: marked failed", zap.String("job", job.ID))
		return failJob(ctx, w.st, job, "the gateway replica running the job stopped before it finished; the job is not run again")
	}
	api, err := w.apis(args.Route)
	if err != nil {
		if d.Attempt < d.MaxAttempts {
			return err
		}
		return failJob(ctx, w.st, job, "the job could not be run: "+err.Error())
	}
	if api.life.stop.Err() != nil && d.Attempt < d.MaxAttempts {
		// The gateway is exiting: leave the job for the next process (or
		// another replica) rather than fail it unrun.
		return errShutdown
	}
	api.runQueued(ctx, job, &args)
	return nil // the run recorded its end, whatever it was: never run it again
}

// enqueueRun queues the async run of bot for job.
func (a *API) enqueueRun(ctx context.Context, jobID, botID string, call runCall) (string, error) {
	header := call.header.Clone()
	for name := range credentialHeaders {
		header.Del(name)
	}
	args, err := json.Marshal(asyncArgs{
		Job: jobID, Route: a.o.Route, Caller: call.id, Bot: botID,
		ContentType: call.contentType, Body: call.body, Header: header, TraceID: call.traceID,
	})
	if err != nil {
		return "", err
	}
	res, err := a.o.Queue.Enqueue(ctx, queue.Job{Kind: AsyncKind, Args: args, UniqueKey: jobID})
	if err != nil {
		return "", fmt.Errorf("enqueuing the async run: %w", err)
	}
	return res.ID, nil
}

// dropQueued cancels a queued run whose AsyncJob could not be written. If
// it already runs, it finds no AsyncJob and ends without running the bot.
func (a *API) dropQueued(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.o.Queue.Cancel(ctx, id); err != nil && !errors.Is(err, queue.ErrRunning) {
		a.o.Logger.Warn("cancelling the queued run of a refused async job", zap.Error(err))
	}
}

// runQueued runs a queued async job here, through the request-less route,
// and records its end.
func (a *API) runQueued(ctx context.Context, job *store.AsyncJob, args *asyncArgs) {
	call := runCall{
		id: args.Caller, bot: botKey{id: args.Bot},
		contentType: args.ContentType, body: args.Body, header: args.Header, traceID: args.TraceID,
	}
	if call.header == nil {
		call.header = http.Header{}
	}
	defer a.bodies.hold(len(call.body))()
	a.completeJob(ctx, job, func(ctx context.Context) *botrunner.Result {
		p, ferr := a.prepare(ctx, call)
		if ferr != nil {
			// The bot was deleted, or its code changed, since the 202.
			return &botrunner.Result{Outcome: botrunner.OutcomeError, Message: ferr.Message}
		}
		return a.runPrepared(ctx, p)
	})
}

// failJob marks an accepted job failed with text, unless it ended
// meanwhile (the write is conditional on the version read).
func failJob(ctx context.Context, st *store.Store, job *store.AsyncJob, text string) error {
	job.Status = jobError
	job.TransactionTime = store.FormatTime(time.Now())
	job.Output = outcomeParameter(http.StatusInternalServerError, text)
	_, err := st.Put(ctx, job, store.PutOptions{IfMatch: job.Meta.VersionID, TTL: jobRetention})
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("failing async job %s: %w", job.ID, err)
	}
	return nil
}

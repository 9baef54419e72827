package botapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/fhirstore"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// jobRetention is how long a finished AsyncJob can be polled.
const jobRetention = 7 * 24 * time.Hour

// Job statuses, Medplum's AsyncJob.status values.
const (
	jobAccepted  = "accepted"
	jobCompleted = "completed"
	jobError     = "error"
)

// wantsAsync tells whether the caller asked for an asynchronous run. The
// value must be exactly respond-async, as Medplum requires.
func wantsAsync(r *http.Request) bool {
	return strings.TrimSpace(r.Header.Get("Prefer")) == "respond-async"
}

// startJob records an accepted AsyncJob for the prepared run p and
// answers 202 with its status URL. With a queue, the run is an AsyncKind
// job that any replica may take (asyncqueue.go), enqueued before the
// AsyncJob is written so that no crash leaves an accepted job that nothing
// will run; without one it runs here, on the request's route. release
// lets go of the request body once nothing here needs it.
func (a *API) startJob(w http.ResponseWriter, r *http.Request, id *oauth.Identity, base string, p *preparedRun, call runCall, release func()) {
	job := &store.AsyncJob{Status: jobAccepted, Request: requestURL(r), RequestTime: store.FormatTime(time.Now())}
	job.ID = uuid.Must(uuid.NewV7()).String()
	job.Meta.Project = id.ProjectID
	if id.UserID != "" {
		job.Owner = &store.Reference{Reference: "User/" + id.UserID}
	}
	if a.o.Queue != nil {
		defer release() // the body is in the queue's job now
		queued, err := a.enqueueRun(r.Context(), job.ID, p.bot.ID, call)
		if err != nil {
			a.writeStoreError(w, err)
			return
		}
		if _, err := a.o.Store.Put(r.Context(), job, a.o.recordOptions(jobRetention)); err != nil {
			a.dropQueued(queued)
			a.writeJobRefusal(w, err)
			return
		}
	} else {
		if _, err := a.o.Store.Put(r.Context(), job, a.o.recordOptions(jobRetention)); err != nil {
			release()
			a.writeJobRefusal(w, err)
			return
		}
		// The run outlives the request: keep its values (Caddy's
		// per-request state the backend client needs), drop its
		// cancellation; a shutdown stops it after its grace.
		go func() {
			defer release()
			a.completeJob(context.WithoutCancel(r.Context()), job, func(ctx context.Context) *botrunner.Result {
				p.started = time.Now()
				return a.runPrepared(ctx, p)
			})
		}()
	}
	statusURL := fhirstore.BaseURL(r) + base + "/job/" + job.ID + "/status"
	w.Header().Set("Content-Location", statusURL)
	out := fhir.NewOutcome(http.StatusAccepted, "Accepted")
	out.Issue[0].Diagnostics = statusURL
	fhir.WriteJSON(w, http.StatusAccepted, out)
}

// completeJob runs an accepted job's bot within the API's lifecycle and
// records its end: the result, or the failure a panic or a shutdown gave it.
func (a *API) completeJob(parent context.Context, job *store.AsyncJob, run func(ctx context.Context) *botrunner.Result) {
	ctx, end := a.life.begin(parent)
	defer end()
	defer func() {
		if p := recover(); p != nil {
			a.o.Logger.Error("async bot job panicked", zap.String("job", job.ID), zap.Any("panic", p))
			a.finishJob(job, jobError, outcomeParameter(http.StatusInternalServerError, "the job failed unexpectedly"))
		}
	}()
	res := run(ctx)
	if why, stopped := a.life.stoppedByShutdown(ctx); stopped {
		a.finishJob(job, jobError, outcomeParameter(http.StatusServiceUnavailable, why))
		return
	}
	status, output := jobOutput(res, a.o.AsyncResultMax)
	a.finishJob(job, status, output)
}

// runPrepared runs p for an async job: input the runner refuses once the
// run holds a slot (after the 202) fails the job with the 400 a
// synchronous call answers.
func (a *API) runPrepared(ctx context.Context, p *preparedRun) *botrunner.Result {
	res, err := a.run(ctx, p)
	if ierr := fhir.AsError(err); ierr != nil {
		return &botrunner.Result{Outcome: botrunner.OutcomeError, Message: ierr.Message}
	}
	return res
}

// finishJob records a job's end. A result the store refuses (the project
// is at its quota of bot records, or the disk at its reserve) fails the
// job instead, with a short outcome written past the quota, so its poller
// learns why rather than waiting forever. The write is conditional on the
// accepted version: a job that ended otherwise meanwhile keeps the end it
// was given.
func (a *API) finishJob(job *store.AsyncJob, status string, output map[string]any) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	accepted := job.Meta.VersionID
	job.Status = status
	job.TransactionTime = store.FormatTime(time.Now())
	job.Output = output
	opts := a.o.recordOptions(jobRetention)
	opts.IfMatch = accepted
	_, err := a.o.Store.Put(ctx, job, opts)
	if reason := refusalReason(err); reason != "" {
		a.o.OnRecordRefused("async_job", reason)
		a.o.Logger.Warn("async job result refused by the store", zap.String("job", job.ID),
			zap.String("project", job.Meta.Project), zap.String("reason", reason), zap.Error(err))
		job.Status = jobError
		job.Output = outcomeParameter(http.StatusInsufficientStorage, "the job's result was not stored: "+refusalText(err))
		_, err = a.o.Store.Put(ctx, job, store.PutOptions{TTL: jobRetention, IfMatch: accepted})
	}
	if errors.Is(err, store.ErrConflict) {
		a.o.Logger.Warn("async job ended otherwise before its run recorded the end", zap.String("job", job.ID))
		return
	}
	if err != nil {
		a.o.Logger.Error("recording async job result", zap.String("job", job.ID), zap.Error(err))
	}
}

// jobOutput turns a run's result into Medplum's AsyncJob output: a FHIR
// Parameters with the response body (or the outcome of a failure). A body
// over maxResult bytes fails the job.
func jobOutput(res *botrunner.Result, maxResult int) (string, map[string]any) {
	if res == nil {
		return jobError, outcomeParameter(http.StatusTooManyRequests, "too many bot runs in progress; the job was not run")
	}
	if res.Outcome != botrunner.OutcomeSuccess {
		return jobError, outcomeParameter(http.StatusBadRequest, res.Message)
	}
	if len(res.Body) > maxResult {
		return jobError, outcomeParameter(http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"the bot's result of %d bytes exceeds the %d-byte limit of an async job's stored result (bot_async_result_max)", len(res.Body), maxResult))
	}
	param := map[string]any{"name": "responseBody"}
	switch {
	case strings.Contains(res.ContentType, "json"):
		var v any
		if json.Unmarshal(res.Body, &v) == nil {
			if m, ok := v.(map[string]any); ok && m["resourceType"] == "OperationOutcome" {
				param = map[string]any{"name": "outcome", "resource": m}
				break
			}
			if b, ok := v.(bool); ok {
				param["valueBoolean"] = b
				break
			}
		}
		param["valueString"] = string(res.Body)
	default:
		param["valueString"] = string(res.Body)
	}
	return jobCompleted, map[string]any{"resourceType": "Parameters", "parameter": []any{param}}
}

// writeJobRefusal answers an async run whose job the store refused: 429
// with Retry-After when the project is at its quota of bot records (the
// wait is until its oldest records expire), 503 when the disk is at the
// reserve kept for sign-ins.
func (a *API) writeJobRefusal(w http.ResponseWriter, err error) {
	reason := refusalReason(err)
	if reason == "" {
		a.writeStoreError(w, err)
		return
	}
	a.o.OnRecordRefused("async_job", reason)
	a.o.Logger.Warn("async bot run refused", zap.String("reason", reason), zap.Error(err))
	status, retry := http.StatusServiceUnavailable, 60*time.Second
	var qe *store.QuotaError
	if errors.As(err, &qe) {
		status, retry = http.StatusTooManyRequests, time.Hour
		if !qe.Frees.IsZero() {
			retry = min(max(time.Until(qe.Frees), time.Second), 24*time.Hour)
		}
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(retry.Round(time.Second)/time.Second)))
	fhir.WriteOutcome(w, status, refusalText(err))
}

// refusalReason names why the store refused a bot record: "quota",
// "disk", or "" for any other error.
func refusalReason(err error) string {
	switch {
	case errors.Is(err, store.ErrQuotaExceeded):
		return "quota"
	case errors.Is(err, store.ErrUnwritable):
		return "disk"
	}
	return ""
}

// refusalText says why to a client, naming the limit.
func refusalText(err error) string {
	var qe *store.QuotaError
	if errors.As(err, &qe) {
		return fmt.Sprintf("the project's bot records (AuditEvents and async jobs) take %d bytes of its %d-byte quota (project_bot_records_max); they expire with time", qe.Used, qe.Limit)
	}
	return "the store's disk is down to the space kept for sign-ins (bot_records_disk_reserve); bot records are refused"
}

func outcomeParameter(status int, text string) map[string]any {
	return map[string]any{"resourceType": "Parameters", "parameter": []any{
		map[string]any{"name": "outcome", "resource": fhir.NewOutcome(status, text)},
	}}
}

// serveJobStatus answers GET {base}/job/{id}/status: the AsyncJob, with 202
// while it runs and 200 once it has ended (what MedplumClient polls for).
// Only the user who started the job and the project's admins may read it
// (a result can hold whatever the bot read as that user); anyone else gets
// the same 404 as for a job that does not exist, so a job's existence is
// not confirmed either.
func (a *API) serveJobStatus(w http.ResponseWriter, r *http.Request, id *oauth.Identity, jobID string) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		fhir.WriteOutcome(w, http.StatusMethodNotAllowed, "job status accepts GET only")
		return
	}
	job, err := store.Get[store.AsyncJob](r.Context(), a.o.Store, jobID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !mayReadJob(job, id)) {
		fhir.WriteOutcome(w, http.StatusNotFound, fmt.Sprintf("job %s not found", jobID))
		return
	}
	if err != nil {
		a.writeStoreError(w, err)
		return
	}
	status := http.StatusOK
	if job.Status == jobAccepted || job.Status == "active" {
		status = http.StatusAccepted
	}
	job.Owner = nil // fhirgate's bookkeeping: the answer keeps Medplum's AsyncJob shape
	fhir.WriteJSON(w, status, job)
}

// mayReadJob tells whether the caller may read the job: a member of its
// project who started it (the same User, from any sign-in or client), or an
// admin of its project. A job without an owner, stored before owners were
// recorded, is for admins only.
func mayReadJob(job *store.AsyncJob, id *oauth.Identity) bool {
	if job.Meta.Project != id.ProjectID {
		return false
	}
	if id.Admin {
		return true
	}
	return job.Owner != nil && id.UserID != "" && job.Owner.Reference == "User/"+id.UserID
}

// requestURL is the full URL of the request as the client made it.
func requestURL(r *http.Request) string {
	return fhirstore.BaseURL(r) + r.URL.RequestURI()
}

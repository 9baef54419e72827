package botapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
)

// An async run happens on the replica that accepted it: the bot's medplum
// client goes through that request's backend connection (Caddy's
// per-request state), which no other replica has. What the queue holds is
// its lease: a job of kind LeaseKind, due when the lease runs out, that the
// running replica renews every third of the lease and cancels when the run
// has recorded its end. A replica that dies stops renewing; the lease job
// then runs on whichever replica takes it and marks the AsyncJob failed —
// never running the bot again (it may have done part of its work). A
// replica that merely starts touches no job.

// LeaseKind is the job kind of async runs' leases.
const LeaseKind = "bot.async_lease"

// DefaultAsyncLease is an async run's lease when Options.AsyncLease is 0:
// how long after its replica died a job is marked failed.
const DefaultAsyncLease = 30 * time.Second

type leaseArgs struct {
	Job string `json:"job"`
}

// RegisterJobs registers the bot API's job kinds on q, which every API
// using q needs: the worker that fails async jobs whose lease ran out.
// Call it before q starts.
func RegisterJobs(q queue.Queue, st *store.Store, logger *zap.Logger) error {
	if logger == nil {
		logger = zap.NewNop()
	}
	return q.Register(LeaseKind, func(ctx context.Context, d *queue.Delivery) error {
		var a leaseArgs
		if err := json.Unmarshal(d.Args, &a); err != nil || a.Job == "" {
			return nil // not ours to repair: nothing to retry
		}
		failed, err := failLapsedJob(ctx, st, a.Job)
		if failed {
			logger.Warn("async bot job's replica stopped before it finished: marked failed", zap.String("job", a.Job))
		}
		return err
	}, queue.KindOptions{MaxAttempts: 10, Timeout: 30 * time.Second})
}

// failLapsedJob marks the job failed if it is still accepted or active.
// A run that records its end at the same moment wins or loses by the
// version check; either way the job ends once.
func failLapsedJob(ctx context.Context, st *store.Store, id string) (bool, error) {
	job, err := store.Get[store.AsyncJob](ctx, st, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // never created (the run's write failed) or expired
	}
	if err != nil {
		return false, err
	}
	if job.Status != jobAccepted && job.Status != "active" {
		return false, nil
	}
	job.Status = jobError
	job.TransactionTime = store.FormatTime(time.Now())
	job.Output = outcomeParameter(http.StatusInternalServerError,
		"the gateway replica running the job stopped before it finished; the job is not run again")
	_, err = st.Put(ctx, job, store.PutOptions{IfMatch: job.Meta.VersionID, TTL: jobRetention})
	if errors.Is(err, store.ErrConflict) {
		return false, nil // it ended meanwhile
	}
	if err != nil {
		return false, fmt.Errorf("failing async job %s: %w", id, err)
	}
	return true, nil
}

// lease is one async run's lease in the queue.
type lease struct {
	q     queue.Queue
	every time.Duration
	args  json.RawMessage
	id    string // the current lease job
}

// takeLease enqueues the lease of the job with id, due after d. A nil
// queue gives a nil lease (a store that one process has alone: a restart
// fails its jobs, FailInterruptedJobs).
func takeLease(ctx context.Context, q queue.Queue, jobID string, d time.Duration) (*lease, error) {
	if q == nil {
		return nil, nil
	}
	args, err := json.Marshal(leaseArgs{Job: jobID})
	if err != nil {
		return nil, err
	}
	l := &lease{q: q, every: d, args: args}
	res, err := q.Enqueue(ctx, queue.Job{Kind: LeaseKind, Args: args, RunAt: time.Now().Add(d)})
	if err != nil {
		return nil, fmt.Errorf("enqueuing the async job's lease: %w", err)
	}
	l.id = res.ID
	return l, nil
}

// keep renews the lease every third of it until ctx ends. A renewal that
// fails is tried again at the next; the lease runs out only if none
// succeeds for its whole length.
func (l *lease) keep(ctx context.Context, logger *zap.Logger) {
	if l == nil {
		return
	}
	t := time.NewTicker(l.every / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := l.q.Enqueue(ctx, queue.Job{Kind: LeaseKind, Args: l.args, RunAt: time.Now().Add(l.every)})
		if err != nil {
			if ctx.Err() == nil {
				logger.Warn("renewing an async job's lease", zap.Error(err))
			}
			continue
		}
		old := l.id
		l.id = res.ID
		if err := l.q.Cancel(ctx, old); err != nil && ctx.Err() == nil {
			logger.Warn("dropping an async job's renewed lease", zap.Error(err))
		}
	}
}

// release cancels the lease once the run's end is recorded. Called after
// keep has returned.
func (l *lease) release(logger *zap.Logger) {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.q.Cancel(ctx, l.id); err != nil {
		// It runs when due and finds the job ended: nothing is lost.
		logger.Warn("cancelling an async job's lease", zap.Error(err))
	}
}

package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fhirgate/fhirgate/internal/queue"
)

// recordingQueue is the real queue, recording the jobs enqueued on it
// and each attempt its workers returned from, so that a test knows
// which jobs exist and how they ran. returned, when set, is told of each
// attempt as its worker returns (before the queue records the outcome).
// failBatches is how many EnqueueBatch calls to come fail.
type recordingQueue struct {
	queue.Queue
	mu          sync.Mutex
	enqueued    []enqueuedJob
	attempts    []attempt
	returned    func(d *queue.Delivery, err error)
	failBatches atomic.Int32
}

// enqueuedJob is a job enqueued; ID is known for Enqueue's only.
type enqueuedJob struct {
	queue.Job
	ID string
}

// attempt is one run of a worker.
type attempt struct {
	ID, Kind             string
	Attempt, MaxAttempts int
	Args                 json.RawMessage
	Err                  error
}

// Register implements queue.Queue, recording the worker's attempts.
func (q *recordingQueue) Register(kind string, w queue.Worker, o queue.KindOptions) error {
	return q.Queue.Register(kind, func(ctx context.Context, d *queue.Delivery) error {
		err := w(ctx, d)
		q.mu.Lock()
		q.attempts = append(q.attempts, attempt{ID: d.ID, Kind: d.Kind, Attempt: d.Attempt, MaxAttempts: d.MaxAttempts, Args: d.Args, Err: err})
		returned := q.returned
		q.mu.Unlock()
		if returned != nil {
			returned(d, err)
		}
		return err
	}, o)
}

// Enqueue implements queue.Queue.
func (q *recordingQueue) Enqueue(ctx context.Context, j queue.Job) (queue.Enqueued, error) {
	e, err := q.Queue.Enqueue(ctx, j)
	if err == nil {
		q.mu.Lock()
		q.enqueued = append(q.enqueued, enqueuedJob{Job: j, ID: e.ID})
		q.mu.Unlock()
	}
	return e, err
}

// EnqueueBatch implements queue.Queue.
func (q *recordingQueue) EnqueueBatch(ctx context.Context, jobs []queue.Job) error {
	if q.failBatches.Add(-1) >= 0 {
		return errors.New("the queue's store is unavailable")
	}
	err := q.Queue.EnqueueBatch(ctx, jobs)
	if err == nil {
		q.mu.Lock()
		for _, j := range jobs {
			q.enqueued = append(q.enqueued, enqueuedJob{Job: j})
		}
		q.mu.Unlock()
	}
	return err
}

// jobs returns the jobs of kind enqueued so far.
func (q *recordingQueue) jobs(kind string) []enqueuedJob {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(q.enqueued), func(j enqueuedJob) bool { return j.Kind != kind })
}

// attemptsOf returns the attempts of kind's workers so far.
func (q *recordingQueue) attemptsOf(kind string) []attempt {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(q.attempts), func(a attempt) bool { return a.Kind != kind })
}

// waitState waits until job id is in state.
func (q *recordingQueue) waitState(t *testing.T, id string, state queue.JobState) {
	t.Helper()
	eventually(t, "job "+id+" "+string(state), func() bool {
		info, err := q.Get(context.Background(), id)
		return err == nil && info.State == state
	})
}

// deliverArgsOf decodes a DeliverKind job's arguments.
func deliverArgsOf(t *testing.T, raw json.RawMessage) deliverArgs {
	t.Helper()
	var a deliverArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

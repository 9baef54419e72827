package subscription

import (
	"context"
	"time"

	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/subscription/spec"
)

// botRunBound bounds one bot delivery: the longest timeout a Bot accepts
// and a minute's wait for a run slot, as botapi bounds an async run.
const botRunBound = time.Duration(store.MaxBotTimeout)*time.Second + time.Minute

// inlineBotRuns is how many bot deliveries a trigger runs itself however
// long each takes (deliverBots hands the rest over to DeliverKind jobs
// when less than botRunBound is left): as many as the bench's write
// matches (cmd/fhirgate-bench scenario 12).
const inlineBotRuns = 5

// triggerTimeout bounds a trigger job: its matching, then inlineBotRuns
// of the longest bot runs one after another, so that the deadline never
// cuts a run short (a run stopped by it would be recorded as failed, not
// retried). Bots usually take milliseconds; the bound is that long
// because a Bot may take 15 minutes. On PostgreSQL it is also the lease:
// a trigger whose replica died runs again elsewhere once it runs out.
const triggerTimeout = inlineBotRuns*botRunBound + time.Minute

// botDelivery is a match for a bot Subscription, to run by its trigger.
type botDelivery struct {
	rule *spec.Rule
	args deliverArgs
}

// deliverBots runs the bot deliveries of a trigger, one after another:
// the queue's workers already run triggers side by side, and runs in
// sequence compete less with the clients' writes than a job each (whose
// enqueue, claim and outcome commits cost more than a bot run). Each is
// the first attempt of s.deliver; one that returns an error (a bot that
// could not start) is retried by a DeliverKind job that goes on from the
// second attempt. Those left when the trigger's time runs short (or the
// queue stops) are handed over to DeliverKind jobs as first attempts. An
// error enqueuing these jobs is returned: the trigger runs again, and so
// do its deliveries (at least once).
func (s *Service) deliverBots(ctx context.Context, bots []botDelivery) error {
	var jobs []queue.Job
	for i := range bots {
		b := &bots[i]
		if !timeForABot(ctx) {
			for _, rest := range bots[i:] {
				j, err := deliveryJob(rest.rule, &rest.args)
				if err != nil {
					return err
				}
				jobs = append(jobs, j)
			}
			break
		}
		if s.deliver(ctx, &b.args, 1, botDeliverAttempts) == nil {
			continue
		}
		b.args.Attempted = 1
		j, err := deliveryJob(b.rule, &b.args)
		if err != nil {
			return err
		}
		// The backoff the job's own first failure would get.
		j.RunAt = time.Now().Add(queue.Backoff(1))
		jobs = append(jobs, j)
	}
	// Without ctx's end: a queue that stops still takes the retries,
	// rather than running the whole trigger again.
	return s.enqueueAll(context.WithoutCancel(ctx), jobs)
}

// timeForABot tells whether a bot may start under ctx: ctx is live and
// its deadline, if any, leaves room for the longest run.
func timeForABot(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) >= botRunBound
}

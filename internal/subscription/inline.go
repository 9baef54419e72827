package subscription

import (
	"context"
	"time"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/subscription/spec"
)

// botRunBound bounds one bot delivery: the longest timeout a Bot accepts
// and a minute's wait for a run slot, as botapi bounds an async run.
const botRunBound = time.Duration(store.MaxBotTimeout)*time.Second + time.Minute

// inlineBotRuns is how many bot deliveries at the default bot timeout a
// trigger has time for, besides the longest one: as many as a write
// matches in the bench (cmd/fhirgate-bench scenario 12).
const inlineBotRuns = 5

// triggerTimeout bounds a trigger job: a minute for its matching, then
// its bot deliveries one after another. A bot starts only while
// botRunBound is left (deliverBots hands the rest over to DeliverKind
// jobs), so the deadline never cuts a run short, which would record it
// as failed, not retry it. Bots run for milliseconds to the default
// bot_timeout (10 s, with up to bot_queue_timeout, 1 s, for a slot) and
// a Bot may set up to 15 minutes: the bound holds inlineBotRuns runs at
// the default and the longest one, and not five of the longest, because
// on PostgreSQL it is also the lease, how long a trigger whose replica
// died waits to run again elsewhere (an async run's is 16 minutes).
const triggerTimeout = time.Minute + inlineBotRuns*(botrunner.DefaultTimeout+botrunner.DefaultQueueTimeout) + botRunBound

// botDelivery is a match for a bot Subscription, to run by its trigger:
// change (one of the trigger's) to rule.
type botDelivery struct {
	rule   *spec.Rule
	change *spec.Change
}

// deliverBots runs the bot deliveries of trigger a, one after another:
// the queue's workers already run triggers side by side, and runs in
// sequence compete less with the clients' writes than a job each (whose
// enqueue, claim and outcome commits cost more than a bot run). Each is
// the first attempt of s.deliver; one that returns an error (a bot that
// could not start) is retried by a DeliverKind job that goes on from the
// second attempt. Those left when the trigger's time runs short (or the
// queue stops) are handed over to DeliverKind jobs as first attempts. An
// error enqueuing these jobs is returned: the trigger runs again, and so
// do its deliveries (at least once).
func (s *Service) deliverBots(ctx context.Context, a *triggerArgs, bots []botDelivery) error {
	var jobs []queue.Job
	// One deliverArgs for all: deliver keeps no reference to it, and a
	// job made from it is encoded at once. The bots share the writer's
	// identity too, which nothing modifies.
	var da deliverArgs
	caller := a.Writer.identity()
	for i, b := range bots {
		if !timeForABot(ctx) {
			for _, rest := range bots[i:] {
				da = a.deliverArgs(rest.rule, rest.change)
				j, err := deliveryJob(rest.rule, &da)
				if err != nil {
					return err
				}
				jobs = append(jobs, j)
			}
			break
		}
		da = a.deliverArgs(b.rule, b.change)
		da.caller = caller
		if s.deliver(ctx, &da, 1, botDeliverAttempts) == nil {
			continue
		}
		da.Attempted = 1
		j, err := deliveryJob(b.rule, &da)
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

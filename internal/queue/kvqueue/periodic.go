package kvqueue

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/queue"
)

// periodicLoop enqueues p at each tick. The tick's unique key makes the
// enqueue idempotent; a tick missed while the process was down is not
// replayed.
func (q *Queue) periodicLoop(ctx context.Context, p queue.Periodic) {
	defer q.loops.Done()
	for {
		tick := queue.NextTick(time.Now(), p.Every)
		t := time.NewTimer(time.Until(tick))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		_, err := q.Enqueue(ctx, queue.Job{Kind: p.Kind, Args: p.Args, UniqueKey: queue.TickKey(tick)})
		if err != nil && ctx.Err() == nil {
			q.logger.Error("enqueuing a periodic job", zap.String("kind", p.Kind), zap.Time("tick", tick), zap.Error(err))
		}
	}
}

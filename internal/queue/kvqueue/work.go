package kvqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
)

// dispatchLoop claims due jobs whenever a worker slot is free, on a local
// Enqueue, a finished job, or every PollInterval (for jobs whose time has
// come).
func (q *Queue) dispatchLoop(ctx context.Context) {
	defer q.loops.Done()
	t := time.NewTicker(q.o.PollInterval)
	defer t.Stop()
	for {
		if err := q.dispatch(ctx); err != nil && ctx.Err() == nil {
			q.logger.Error("claiming queued jobs", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		case <-t.C:
		}
	}
}

// dispatch claims as many due jobs as there are free slots and starts
// them.
func (q *Queue) dispatch(ctx context.Context) error {
	for {
		free := cap(q.slots) - len(q.slots)
		if free == 0 {
			return nil
		}
		claimed, err := q.claim(ctx, free)
		if err != nil {
			return err
		}
		for _, r := range claimed {
			q.slots <- struct{}{}
			q.running.Add(1)
			go q.run(r)
		}
		if len(claimed) < free {
			return nil
		}
	}
}

// claim marks up to n due jobs of registered kinds running, in one
// transaction. The scan stops at the n-th claimable job: with a backlog,
// reading every waiting job on each claim made the claim's transaction,
// and its conflict check, grow with the backlog.
func (q *Queue) claim(ctx context.Context, n int) ([]*record, error) {
	q.mu.Lock()
	kinds := q.kinds
	q.mu.Unlock()
	var claimed []*record
	err := q.update(ctx, func(tx store.Txn) error {
		claimed = claimed[:0]
		now := time.Now()
		var due, gone []string // waiting keys of the jobs to claim, and of jobs gone
		err := tx.Scan([]byte(prefixWaiting), false, func(key, _ []byte) error {
			at, id, ok := parseWaiting(key)
			if !ok {
				return nil
			}
			if at.After(now) {
				return store.ErrStopScan
			}
			r, err := readRecord(tx, id)
			if errors.Is(err, queue.ErrNotFound) {
				gone = append(gone, string(key))
				return nil
			}
			if err != nil {
				return err
			}
			if _, ok := kinds[r.Kind]; !ok {
				return nil // no worker in this process: it waits
			}
			due = append(due, string(key))
			claimed = append(claimed, r)
			if len(claimed) >= n {
				return store.ErrStopScan
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range gone {
			if err := tx.Delete([]byte(k)); err != nil {
				return err
			}
		}
		for i, r := range claimed {
			r.State = queue.StateRunning
			r.Attempt++
			if err := tx.Delete([]byte(due[i])); err != nil {
				return err
			}
			if err := tx.Set(runningKey(r.ID), nil, 0); err != nil {
				return err
			}
			if err := writeRecord(tx, r, 0); err != nil {
				return err
			}
		}
		return nil
	})
	return claimed, err
}

// run runs one attempt and records its outcome.
func (q *Queue) run(r *record) {
	defer q.running.Done()
	defer func() {
		<-q.slots
		q.notify()
	}()
	q.mu.Lock()
	kd := q.kinds[r.Kind]
	q.mu.Unlock()
	ctx, cancel := context.WithTimeout(q.workCtx, kd.opts.Timeout)
	err := safeWork(ctx, kd.work, &queue.Delivery{
		ID: r.ID, Kind: r.Kind, Args: r.Args, UniqueKey: r.UniqueKey,
		Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, Rescued: r.Rescued,
	})
	cancel()
	// The outcome is recorded even when the queue is stopping: a job that
	// ran must not run again for want of the write.
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	werr := q.update(wctx, func(tx store.Txn) error {
		// The record is the one claimed: while its running key exists
		// nothing else writes it (Cancel refuses a running job, a rescue
		// runs before the dispatcher starts), so it is not read again;
		// reading the running key makes a concurrent change conflict.
		if _, gerr := tx.Get(runningKey(r.ID)); errors.Is(gerr, store.ErrNotFound) {
			return nil // settled meanwhile
		} else if gerr != nil {
			return gerr
		}
		cur := *r // fn may run again: the claimed record stays as claimed
		cur.Rescued = false
		if err == nil {
			if derr := tx.Delete(runningKey(cur.ID)); derr != nil {
				return derr
			}
			cur.State, cur.LastError = queue.StateCompleted, ""
			return q.finalize(tx, &cur, true)
		}
		cur.LastError = err.Error()
		return q.settle(tx, &cur, time.Now())
	})
	if werr != nil {
		q.logger.Error("recording a job's outcome", zap.String("job", r.ID), zap.String("kind", r.Kind), zap.Error(werr))
	}
	if err != nil {
		q.logger.Warn("job attempt failed", zap.String("job", r.ID), zap.String("kind", r.Kind),
			zap.Int("attempt", r.Attempt), zap.Int("max_attempts", r.MaxAttempts), zap.Error(err))
	}
}

// safeWork runs w, turning a panic into an error.
func safeWork(ctx context.Context, w queue.Worker, d *queue.Delivery) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("job %s (%s) panicked: %v", d.ID, d.Kind, p)
		}
	}()
	return w(ctx, d)
}

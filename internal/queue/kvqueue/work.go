package kvqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
)

// dispatchLoop claims due jobs whenever a worker slot is free, on a local
// Enqueue, a finished job, or every PollInterval (for jobs whose time has
// come). At start, at each poll and after an EnqueueTx it first looks
// into the store for due jobs it does not know (refill).
func (q *Queue) dispatchLoop(ctx context.Context) {
	defer q.loops.Done()
	t := time.NewTicker(q.o.PollInterval)
	defer t.Stop()
	refill := true
	for {
		if refill || q.unindexed.Swap(false) {
			if err := q.refill(ctx); err != nil && ctx.Err() == nil {
				q.logger.Error("looking for queued jobs", zap.Error(err))
			}
		}
		if err := q.dispatch(ctx); err != nil && ctx.Err() == nil {
			q.logger.Error("claiming queued jobs", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
			refill = false
		case <-t.C:
			refill = true
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
			q.claimed <- r // never blocks: it has room for every slot
		}
		if len(claimed) == 0 && !q.idx.hasDue(time.Now()) {
			return nil // (a claim that found its jobs gone takes the next)
		}
	}
}

// refill adds to the index the due jobs of registered kinds that are in
// the store and not in the index, unless jobs it knows are due (then the
// dispatcher has work, and looks again once it has none). It scans the
// waiting keys: the scan that the index spares the claims.
func (q *Queue) refill(ctx context.Context) error {
	now := time.Now()
	if q.idx.hasDue(now) {
		return nil
	}
	q.mu.Lock()
	kinds := q.kinds
	q.mu.Unlock()
	var gone [][]byte // waiting keys of jobs gone
	err := q.kv.View(ctx, func(tx store.Txn) error {
		gone = gone[:0]
		return tx.Scan([]byte(prefixWaiting), false, func(key, value []byte) error {
			at, id, ok := parseWaiting(key)
			if !ok {
				return nil
			}
			if at.After(now) {
				return store.ErrStopScan
			}
			if q.idx.knows(id) {
				return nil
			}
			r, err := waitingRecord(tx, id, value)
			if errors.Is(err, queue.ErrNotFound) {
				gone = append(gone, key)
				return nil
			}
			if err != nil {
				return err
			}
			if _, ok := kinds[r.Kind]; ok {
				q.idx.add(&entry{key: string(key), at: at, id: id})
			} // else no worker in this process: it waits
			return nil
		})
	})
	if err != nil || len(gone) == 0 {
		return err
	}
	return q.updateUnsynced(ctx, func(tx store.Txn) error {
		for _, k := range gone {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// claim marks up to n due jobs of the index running, in one transaction,
// which reads the waiting key of each (a point read): a job cancelled or
// claimed by another queue meanwhile is skipped and forgotten.
func (q *Queue) claim(ctx context.Context, n int) ([]*record, error) {
	due := q.idx.takeDue(time.Now(), n)
	if len(due) == 0 {
		return nil, nil
	}
	var claimed []*record
	err := q.updateUnsynced(ctx, func(tx store.Txn) error {
		claimed = claimed[:0] // fn may run again
		for _, e := range due {
			v, err := tx.Get([]byte(e.key))
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			r, err := e.record(tx, v)
			if errors.Is(err, queue.ErrNotFound) {
				if err := tx.Delete([]byte(e.key)); err != nil { // its job is gone
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			r.State = queue.StateRunning
			r.Attempt++
			if err := tx.Delete([]byte(e.key)); err != nil {
				return err
			}
			if err := tx.Set(runningKey(r.ID), nil, 0); err != nil {
				return err
			}
			if err := writeRecord(tx, r, 0); err != nil {
				return err
			}
			claimed = append(claimed, r)
		}
		return nil
	})
	if err != nil {
		q.idx.putBack(due)
		return nil, err
	}
	q.idx.forget(due)
	return claimed, nil
}

// record is a copy of the record of a claimed entry: the one it holds,
// or the one its waiting key's value v holds.
func (e *entry) record(tx store.Txn, v []byte) (*record, error) {
	if e.r != nil {
		r := *e.r
		return &r, nil
	}
	return waitingRecord(tx, e.id, v)
}

// waitingRecord is the record of a waiting job: the copy its waiting key
// holds, or (a key written without one, by an earlier version) its job
// key's.
func waitingRecord(tx store.Txn, id string, value []byte) (*record, error) {
	if len(value) == 0 {
		return readRecord(tx, id)
	}
	r := &record{}
	if err := json.Unmarshal(value, r); err != nil {
		return nil, fmt.Errorf("decoding waiting job %s: %w", id, err)
	}
	return r, nil
}

// work runs the jobs the dispatcher claims until Stop.
func (q *Queue) work() {
	for r := range q.claimed {
		q.run(r)
	}
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
	var retry written
	werr := q.updateUnsynced(wctx, func(tx store.Txn) error {
		retry = retry[:0]
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
		return q.settle(tx, &cur, time.Now(), &retry)
	})
	if werr == nil {
		q.index(retry)
	}
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

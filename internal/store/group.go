package store

import (
	"context"
	"fmt"
)

// maxGroup bounds how many creates share one transaction, well inside
// Badger's transaction size limits for records of a few KiB.
const maxGroup = 128

// groupedWrite is a create waiting to share a transaction with concurrent
// ones (Store.group, a groupcommit.Group). Badger syncs its write-ahead
// log once per transaction, so a stream of independent writes (a Login per
// token exchange) would otherwise be capped by the disk's sync rate. Each
// caller still returns only after its own write is committed and synced:
// durability of acknowledged writes is unchanged.
type groupedWrite struct {
	ctx context.Context
	w   *pendingWrite
}

// commitGrouped stores w, possibly together with concurrent writes.
func (s *Store) commitGrouped(ctx context.Context, w *pendingWrite) error {
	return s.group.Do(ctx, &groupedWrite{ctx: ctx, w: w})
}

// commitBatch writes a batch in one transaction. If the transaction fails
// (one write conflicts or is invalid), each write is retried on its own so
// that only the failing one fails.
func (s *Store) commitBatch(batch []*groupedWrite) []error {
	errs := make([]error, len(batch))
	if len(batch) > 1 {
		writes := make([]*pendingWrite, len(batch))
		for i, op := range batch {
			writes[i] = op.w
		}
		err := s.applyWrites(context.Background(), writes, false)
		for _, w := range writes {
			s.changes.note(w.typ, w.r.Base().ID) // before any caller returns
		}
		if err == nil {
			return errs
		}
	}
	for i, op := range batch {
		err := s.applyWrites(op.ctx, []*pendingWrite{op.w}, false)
		s.changes.note(op.w.typ, op.w.r.Base().ID)
		if err != nil {
			err = fmt.Errorf("writing %s/%s: %w", op.w.typ, op.w.r.Base().ID, err)
		}
		errs[i] = err
	}
	return errs
}

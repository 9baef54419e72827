package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Write is one resource of a [Store.PutAll] batch.
type Write struct {
	// Resource is created or replaced under its id, as [Store.Put] does.
	Resource Resource
	// IfMatch, when set, is the versionId the stored resource must have
	// (see [PutOptions]).
	IfMatch string
}

// PutAll creates or replaces several resources in one transaction, all or
// none: each is stamped, validated and indexed exactly as [Store.Put]
// would, and every reference, unique value and IfMatch is checked against
// the store as the earlier writes of the batch leave it (a membership may
// reference a project created by the same batch; two records of the batch
// may not claim the same unique value). On error nothing is written and the
// resources are left as they were.
//
// On Badger a batch must fit one transaction: Badger commits at most 15%
// of its memtable (2 MiB, so about 314 KB of keys and small values, or
// some thousands of keys) at once; values of 512 bytes and more count only
// as a pointer. A larger batch fails with an error wrapping ErrTxnTooBig,
// and nothing is written. PostgreSQL has no such bound: the batch's checks
// read their keys in one statement and its writes go out in multi-row
// statements (package pgkv), all in one transaction.
func (s *Store) PutAll(ctx context.Context, ws []Write) error {
	return s.putAll(ctx, ws, false)
}

// TryAll checks ws exactly as [Store.PutAll] would — field checks,
// references, unique values, IfMatch, the transaction's size — inside a
// transaction that is then discarded: nothing is written, and the
// resources are left as they were. A later PutAll of the same batch can
// still fail if the store changes in between.
func (s *Store) TryAll(ctx context.Context, ws []Write) error {
	return s.putAll(ctx, ws, true)
}

// errDryRun ends a TryAll transaction so that it is not committed.
var errDryRun = errors.New("dry run")

func (s *Store) putAll(ctx context.Context, ws []Write, dryRun bool) error {
	saved := make([]Base, len(ws))
	restore := func(n int) {
		for i := range n {
			*ws[i].Resource.Base() = saved[i]
		}
	}
	writes := make([]*pendingWrite, len(ws))
	for i, w := range ws {
		res, err := asStorable(w.Resource)
		if err != nil {
			restore(i)
			return err
		}
		b := res.Base()
		if !ValidID(b.ID) {
			restore(i)
			return invalid("id", fmt.Sprintf("%q is not a valid id ([A-Za-z0-9-.]{1,64})", b.ID))
		}
		saved[i] = *b
		if writes[i], err = s.prepare(res, PutOptions{IfMatch: w.IfMatch}, true); err != nil {
			restore(i + 1)
			return fmt.Errorf("%s/%s: %w", res.resourceType(), b.ID, err)
		}
	}
	var err error
	if dryRun {
		err = s.kv.Update(ctx, func(tx Txn) error {
			u := s.newUsage(tx)
			if err := prefetch(tx, writes); err != nil {
				return err
			}
			for _, w := range writes {
				if err := w.apply(tx, u); err != nil {
					return fmt.Errorf("%s/%s: %w", w.typ, w.r.Base().ID, err)
				}
			}
			if err := u.flush(); err != nil {
				return err
			}
			return errDryRun
		})
	} else {
		err = s.applyWrites(ctx, writes, true)
	}
	if dryRun {
		restore(len(ws))
		if errors.Is(err, errDryRun) {
			return nil
		}
		return fmt.Errorf("checking %d resources: %w", len(ws), err)
	}
	for _, w := range writes {
		s.changes.note(w.typ, w.r.Base().ID)
	}
	if err != nil {
		restore(len(ws))
		return fmt.Errorf("writing %d resources: %w", len(ws), err)
	}
	return nil
}

// Validate checks r as [Store.Put] would before writing it (id syntax,
// then normalisation and the type's own field checks, on a copy) and writes
// nothing; r is not modified. What only the stored data can tell —
// references to other records, unique values, versions — is checked when
// the record is written.
func (s *Store) Validate(r Resource) error {
	res, err := asStorable(r)
	if err != nil {
		return err
	}
	if !ValidID(res.Base().ID) {
		return invalid("id", fmt.Sprintf("%q is not a valid id ([A-Za-z0-9-.]{1,64})", res.Base().ID))
	}
	data, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", res.resourceType(), err)
	}
	c, err := decodeRecord(res.resourceType(), data)
	if err != nil {
		return err
	}
	_, err = s.prepare(c, PutOptions{}, true)
	return err
}

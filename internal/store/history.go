package store

import (
	"context"
	"errors"
	"fmt"
)

// Prior versions. A type that implements versioned keeps its prior
// versions: replacing a record files the one it replaces under
// h/<Type>/<id>/<seq>, in the same transaction, where seq is a new
// time-ordered id (so keys sort in the order the versions were replaced),
// and drops the oldest beyond the type's bound. Deleting the record drops
// them too. Only Bots keep versions (Bot/{id}/_history); the store's other
// types are written too often for it to be worth the space.
type versioned interface {
	keptVersions() int
}

const historyPrefix = "h/"

func historyPrefixKey(resourceType, id string) []byte {
	return []byte(historyPrefix + resourceType + "/" + id + "/")
}

// keepVersion files old, the encoded version that a write replaces, and
// drops the oldest versions beyond keep.
func keepVersion(tx Txn, resourceType, id string, old []byte, keep int) error {
	prefix := historyPrefixKey(resourceType, id)
	if err := tx.Set(append(prefix, newID()...), old, 0); err != nil {
		return err
	}
	var keys [][]byte
	err := tx.Scan(prefix, true, func(k, _ []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys[min(keep, len(keys)):] {
		if err := tx.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// dropVersions deletes the prior versions of a deleted record.
func dropVersions(tx Txn, resourceType, id string) error {
	var keys [][]byte
	err := tx.Scan(historyPrefixKey(resourceType, id), false, func(k, _ []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// History returns the versions of resourceType/id the store has, newest
// first: the current one, then the prior ones it keeps (at most the
// type's bound; none for a type that keeps no versions). ErrNotFound when
// the resource does not exist.
func (s *Store) History(ctx context.Context, resourceType, id string) ([]Resource, error) {
	if _, err := newStorable(resourceType); err != nil {
		return nil, err
	}
	if !ValidID(id) {
		return nil, fmt.Errorf("reading %s/%s history: %w", resourceType, id, ErrNotFound)
	}
	var out []Resource
	err := s.kv.View(ctx, func(tx Txn) error {
		out = out[:0]
		cur, err := readRecord(tx, resourceType, id)
		if err != nil {
			return err
		}
		out = append(out, cur)
		return tx.Scan(historyPrefixKey(resourceType, id), true, func(_, v []byte) error {
			r, err := decodeRecord(resourceType, v)
			if err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s history: %w", resourceType, id, err)
	}
	return out, nil
}

// HistoryOf returns the versions of the resource of type T with the given
// id, newest first (see [Store.History]).
func HistoryOf[T any, P interface {
	*T
	Resource
}](ctx context.Context, s *Store, id string) ([]P, error) {
	return listAs[T, P](func(resourceType string) ([]Resource, error) {
		return s.History(ctx, resourceType, id)
	})
}

// ScheduledBots returns every bot with a schedule (cronString or
// cronTiming), in all projects, read through the Bot.cron index.
func (s *Store) ScheduledBots(ctx context.Context) ([]*Bot, error) {
	var out []*Bot
	err := s.kv.View(ctx, func(tx Txn) error {
		out = out[:0]
		var ids []string
		err := tx.Scan(indexPrefixKey(idxBotCron), false, func(k, _ []byte) error {
			ids = append(ids, idFromIndexKey(k))
			return nil
		})
		if err != nil {
			return err
		}
		for _, id := range ids {
			r, err := readRecord(tx, "Bot", id)
			if err != nil {
				if errors.Is(err, ErrNotFound) {
					continue // an index entry outliving its record: not a bot to run
				}
				return err
			}
			out = append(out, r.(*Bot))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing scheduled bots: %w", err)
	}
	return out, nil
}

package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// botIdentityMarker records that MigrateBotIdentity has run on this store.
// It lives outside the record, index and claim prefixes, and has no TTL.
var botIdentityMarker = []byte("m/bot-identity")

// MigrateBotIdentity sets RunAsUser on every Bot stored before bots ran as
// themselves, so that they keep running as their caller, as they did; bots
// created afterwards follow Medplum's default (run as the bot). It runs
// once per store: the first run writes a marker in the same transaction
// as the bots, and every later run finds the marker and does nothing. A
// restore of a backup taken by an older release brings back a store
// without the marker, whose bots are then migrated at the next open, as
// they should be.
//
// The records are rewritten in place, keeping their versionId and
// lastUpdated: RunAsUser is not indexed, and the migration changes no
// behaviour a client could observe other than through the field itself.
func (s *Store) MigrateBotIdentity(ctx context.Context) (int, error) {
	n := 0
	err := s.kv.Update(ctx, func(tx Txn) error {
		n = 0
		_, err := tx.Get(botIdentityMarker)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, ErrNotFound):
			return err
		}
		type rewrite struct{ key, data []byte }
		var rewrites []rewrite
		err = tx.Scan(recordTypePrefix("Bot"), false, func(k, v []byte) error {
			r, err := decodeRecord("Bot", v)
			if err != nil {
				return err
			}
			bot := r.(*Bot)
			if bot.RunAsUser {
				return nil
			}
			bot.RunAsUser = true
			data, err := json.Marshal(bot)
			if err != nil {
				return err
			}
			rewrites = append(rewrites, rewrite{append([]byte(nil), k...), data})
			return nil
		})
		if err != nil {
			return err
		}
		for _, w := range rewrites {
			if err := tx.Set(w.key, w.data, 0); err != nil {
				return err
			}
		}
		n = len(rewrites)
		return tx.Set(botIdentityMarker, nil, 0)
	})
	if err != nil {
		return 0, fmt.Errorf("migrating bots to run as their caller: %w", err)
	}
	if n > 0 {
		s.changes.noteType("Bot")
	}
	return n, nil
}

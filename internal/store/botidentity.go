package store

import (
	"bytes"
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
// once per store: the pass that finds no bot left to migrate writes a
// marker in its transaction, and every later run finds the marker and does
// nothing. A restore of a backup taken by an older release brings back a
// store without the marker, whose bots are then migrated at the next open,
// as they should be.
//
// The bots are rewritten in transactions of at most botIdentityBatchBytes
// of records, since Badger commits only about 314 KB at once and a store
// may hold thousands of bots. Each transaction reads the marker, so a pass
// that races another replica's finished migration conflicts and then stops
// (both stores' transactions are serializable) instead of migrating a bot
// created since. The final pass scans every bot again, so a bot written
// behind the resume point by a replica of an older release meanwhile is
// not missed; a crash between passes leaves bots migrated (runAsUser is
// what they get anyway) and the next open finishes the rest.
//
// The records are rewritten in place, keeping their versionId and
// lastUpdated: RunAsUser is not indexed, and the migration changes no
// behaviour a client could observe other than through the field itself.
func (s *Store) MigrateBotIdentity(ctx context.Context) (int, error) {
	total := 0
	defer func() {
		if total > 0 { // cached bots must be read again, passes done or not
			s.changes.noteType("Bot")
		}
	}()
	var after []byte
	for {
		p, err := s.migrateBotIdentityPass(ctx, after)
		if err != nil {
			return total, fmt.Errorf("migrating bots to run as their caller: %w", err)
		}
		total += p.migrated
		if p.done {
			return total, nil
		}
		after = p.resume
	}
}

// botIdentityBatchBytes bounds the records one transaction of
// MigrateBotIdentity rewrites: well under Badger's bound on a transaction
// (15% of its 2 MiB memtable), whatever the bots' sizes.
const botIdentityBatchBytes = 64 << 10

// botIdentityPass is what one transaction of MigrateBotIdentity did.
type botIdentityPass struct {
	migrated int
	// done: the marker is written (by this pass or an earlier run).
	done bool
	// resume is the last key this pass looked at when it stopped at
	// botIdentityBatchBytes; nil to start the next pass from the first bot.
	resume []byte
}

// migrateBotIdentityPass migrates, in one transaction, the bots after the
// key after (all of them when after is nil) until botIdentityBatchBytes of
// rewritten records, and writes the marker if it scanned every bot and
// found all of them fit.
func (s *Store) migrateBotIdentityPass(ctx context.Context, after []byte) (botIdentityPass, error) {
	var p botIdentityPass
	err := s.kv.Update(ctx, func(tx Txn) error {
		p = botIdentityPass{}
		_, err := tx.Get(botIdentityMarker)
		switch {
		case err == nil:
			p.done = true
			return nil
		case !errors.Is(err, ErrNotFound):
			return err
		}
		type rewrite struct{ key, data []byte }
		var rewrites []rewrite
		size := 0
		err = tx.Scan(recordTypePrefix("Bot"), false, func(k, v []byte) error {
			if after != nil && bytes.Compare(k, after) <= 0 {
				return nil
			}
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
			rewrites = append(rewrites, rewrite{k, data})
			if size += len(k) + len(data); size >= botIdentityBatchBytes {
				p.resume = k
				return ErrStopScan
			}
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
		p.migrated = len(rewrites)
		if p.resume != nil || after != nil {
			// More to do, or bots before after to look at again.
			return nil
		}
		p.done = true
		return tx.Set(botIdentityMarker, nil, 0)
	})
	if err != nil {
		return botIdentityPass{}, err
	}
	return p, nil
}

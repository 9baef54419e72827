package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
)

// NormalizeEmail is the one form in which email addresses are compared and
// indexed: the address with the ASCII letters A–Z lower-cased and every
// other byte kept. Two addresses are the same user exactly when their
// normalized forms are equal.
//
// Only ASCII is folded, because Unicode case folding maps distinct
// characters onto ASCII ones: strings.ToLower turns U+212A KELVIN SIGN into
// "k", so an identity provider vouching for "\u212Aate@a.test" would sign in
// as "kate@a.test". A non-ASCII address therefore never matches an ASCII
// one, and non-ASCII characters match only themselves, byte for byte (no
// case or Unicode normalization: "Ö" and "ö" are different addresses).
func NormalizeEmail(email string) string {
	for i := 0; i < len(email); i++ {
		if c := email[i]; 'A' <= c && c <= 'Z' {
			b := []byte(email)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + ('a' - 'A')
				}
			}
			return string(b)
		}
	}
	return email
}

// sameEmail reports whether a and b name the same user.
func sameEmail(a, b string) bool { return NormalizeEmail(a) == NormalizeEmail(b) }

// legacyEmailKey is the unique-index key of an email as releases before
// NormalizeEmail wrote it: lower-cased with strings.ToLower. It differs from
// the current key only for addresses with non-ASCII characters that have a
// lower case (or, like U+212A, fold onto ASCII).
func legacyEmailKey(email string) []byte {
	return uniqueKey(idxUserEmail, strings.ToLower(email))
}

// MigrateEmailIndex moves the email index entries written by releases that
// lower-cased with strings.ToLower onto the key [NormalizeEmail] gives, and
// returns how many users it moved. For ASCII addresses (nearly all) both
// keys are the same and nothing is written. For a user whose address has
// non-ASCII letters, the old entry is deleted (freeing, for example,
// "kate@a.test" held by "\u212Aate@a.test") and the user is indexed under
// its exact address, so it stays findable by it.
//
// No two users can claim the same new key: their old keys would have been
// equal too, and the unique index refused the second one. Should the store
// hold such a pair anyway (an inconsistent restore), the user is left as it
// is and the result wraps ErrConflict, after every other user was migrated.
//
// It is idempotent and cheap when there is nothing to do (one read of the
// User records); run it whenever the store is opened or restored, since a
// backup taken by an older release brings old entries back. Lookups do not
// depend on it for safety: [Store.UserByEmail] and List accept an entry only
// if the user it points at has that exact address.
func (s *Store) MigrateEmailIndex(ctx context.Context) (int, error) {
	var ids []string
	err := s.kv.View(ctx, func(tx Txn) error {
		ids = ids[:0]
		return tx.Scan(recordTypePrefix("User"), false, func(k, v []byte) error {
			// Records are JSON written by encoding/json, which keeps
			// non-ASCII text as raw UTF-8 (escaping only a few characters
			// as \u): a record without either has an ASCII address.
			if asciiOnly(v) && !bytes.Contains(v, []byte(`\u`)) {
				return nil
			}
			r, err := decodeRecord("User", v)
			if err != nil {
				return err
			}
			if u := r.(*User); !bytes.Equal(legacyEmailKey(u.Email), uniqueKey(idxUserEmail, NormalizeEmail(u.Email))) {
				ids = append(ids, u.ID)
			}
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("migrating the email index: %w", err)
	}
	moved := 0
	var conflicts []error
	for _, id := range ids {
		var changed bool
		err := s.kv.Update(ctx, func(tx Txn) error {
			changed = false
			r, err := readRecord(tx, "User", id)
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			u := r.(*User)
			oldKey, newKey := legacyEmailKey(u.Email), uniqueKey(idxUserEmail, NormalizeEmail(u.Email))
			if bytes.Equal(oldKey, newKey) {
				return nil
			}
			holder, err := tx.Get(newKey)
			switch {
			case errors.Is(err, ErrNotFound):
				if err := tx.Set(newKey, []byte(u.ID), 0); err != nil {
					return err
				}
				changed = true
			case err != nil:
				return err
			case string(holder) != u.ID:
				return fmt.Errorf("%w: User/%s and User/%s share an email index entry", ErrConflict, u.ID, holder)
			}
			holder, err = tx.Get(oldKey)
			switch {
			case errors.Is(err, ErrNotFound):
			case err != nil:
				return err
			case string(holder) == u.ID:
				if err := tx.Delete(oldKey); err != nil {
					return err
				}
				changed = true
			}
			if changed {
				announce(tx, "User", u.ID, false)
			}
			return nil
		})
		switch {
		case errors.Is(err, ErrConflict):
			conflicts = append(conflicts, err)
		case err != nil:
			return moved, fmt.Errorf("migrating the email index of User/%s: %w", id, err)
		case changed:
			moved++
		}
	}
	if moved > 0 {
		s.changes.noteType("User")
	}
	if len(conflicts) > 0 {
		return moved, fmt.Errorf("migrating the email index: %w", errors.Join(conflicts...))
	}
	return moved, nil
}

func asciiOnly(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

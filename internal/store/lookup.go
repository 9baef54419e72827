package store

import (
	"context"
	"errors"
	"fmt"
)

// The lookups below serve the token and bot hot paths: each is a point read
// of an index key plus record reads, never a scan of a type.

// UserByEmail returns the user with the given email (compared after
// [NormalizeEmail]), or ErrNotFound.
func (s *Store) UserByEmail(ctx context.Context, email string) (*User, error) {
	var u *User
	err := s.kv.View(ctx, func(tx Txn) error {
		r, err := readByUnique(tx, "User", uniqueKey(idxUserEmail, NormalizeEmail(email)))
		if err != nil {
			return err
		}
		// An entry written by an older release (see MigrateEmailIndex) may
		// point at a user whose address only Unicode-folds to this one.
		if !sameEmail(r.(*User).Email, email) {
			return ErrNotFound
		}
		u = r.(*User)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("looking up user by email: %w", err)
	}
	return u, nil
}

// MembershipsByProjectUser returns the user's memberships in the project,
// ordered by id; none is not an error.
func (s *Store) MembershipsByProjectUser(ctx context.Context, projectID, userID string) ([]*ProjectMembership, error) {
	var out []*ProjectMembership
	err := s.kv.View(ctx, func(tx Txn) error {
		out = out[:0]
		return tx.Scan(indexPrefixKey(idxMembershipProjectUser, projectID, userID), false, func(k, _ []byte) error {
			r, err := readRecord(tx, "ProjectMembership", idFromIndexKey(k))
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			out = append(out, r.(*ProjectMembership))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("looking up memberships of user %s in project %s: %w", userID, projectID, err)
	}
	return out, nil
}

// MembershipByExternalID returns the project's membership with the given
// externalId, or ErrNotFound.
func (s *Store) MembershipByExternalID(ctx context.Context, projectID, externalID string) (*ProjectMembership, error) {
	var m *ProjectMembership
	err := s.kv.View(ctx, func(tx Txn) error {
		r, err := readByUnique(tx, "ProjectMembership", uniqueKey(idxMembershipExternalID, projectID, externalID))
		if err != nil {
			return err
		}
		m = r.(*ProjectMembership)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("looking up membership by externalId in project %s: %w", projectID, err)
	}
	return m, nil
}

// BotByIdentifier returns the project's bot with the identifier
// system|value, or ErrNotFound. With system "" an identifier without a
// system is preferred, then any system; if the value then matches several
// bots the result is ErrConflict (the caller must give a system).
func (s *Store) BotByIdentifier(ctx context.Context, projectID, system, value string) (*Bot, error) {
	var b *Bot
	err := s.kv.View(ctx, func(tx Txn) error {
		r, err := readByUnique(tx, "Bot", uniqueKey(idxBotIdentifier, projectID, system, value))
		if err == nil {
			b = r.(*Bot)
			return nil
		}
		if !errors.Is(err, ErrNotFound) || system != "" {
			return err
		}
		var ids []string
		err = tx.Scan(indexPrefixKey(idxBotIdentifierValue, projectID, value), false, func(k, _ []byte) error {
			ids = append(ids, idFromIndexKey(k))
			if len(ids) > 1 {
				return ErrStopScan
			}
			return nil
		})
		switch {
		case err != nil:
			return err
		case len(ids) == 0:
			return ErrNotFound
		case len(ids) > 1:
			return fmt.Errorf("%w: identifier value %q matches several bots; give its system", ErrConflict, value)
		}
		r, err = readRecord(tx, "Bot", ids[0])
		if err != nil {
			return err
		}
		b = r.(*Bot)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("looking up bot by identifier in project %s: %w", projectID, err)
	}
	return b, nil
}

// readByUnique reads the record a unique index key points at.
func readByUnique(tx Txn, resourceType string, key []byte) (storable, error) {
	id, err := tx.Get(key)
	if err != nil {
		return nil, err
	}
	return readRecord(tx, resourceType, string(id))
}

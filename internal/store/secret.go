package store

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Client secrets are stored as salted PBKDF2-HMAC-SHA256 hashes in
// passlib's modular format:
//
//	$pbkdf2-sha256$<iterations>$<salt, base64url>$<hash, base64url>
//
// They are machine credentials, normally long and random; the iteration
// count makes a short one costly to guess from a leaked store while
// keeping a wrong guess cheap enough (about a millisecond) that a flood of
// them cannot starve the gateway. Callers remember secrets they have
// verified (see internal/oauth), so a client signing in over and over pays
// the hash once.
const (
	secretHashPrefix     = "$pbkdf2-sha256$"
	secretHashIterations = 4096
	secretSaltBytes      = 16
	secretHashBytes      = 32
)

// HashSecret returns the stored form of a client secret. A value that is
// already a hash (or empty) is returned unchanged, so that writing back a
// record read from the store keeps its secret.
func HashSecret(secret string) string {
	if secret == "" || IsHashedSecret(secret) {
		return secret
	}
	salt := make([]byte, secretSaltBytes)
	_, _ = rand.Read(salt) // crypto/rand.Read never fails (Go 1.24+)
	return formatSecretHash(secretHashIterations, salt, deriveSecret(secret, salt, secretHashIterations))
}

// IsHashedSecret tells whether s is in the stored (hashed) form.
func IsHashedSecret(s string) bool { return strings.HasPrefix(s, secretHashPrefix) }

// VerifySecret tells, in time independent of where they differ, whether
// secret is the one stored. A stored value still in clear (written by a
// release that kept secrets in clear, before [Store.MigrateClientSecrets]
// ran) is compared as such.
func VerifySecret(stored, secret string) bool {
	if stored == "" {
		return false
	}
	if !IsHashedSecret(stored) {
		return subtle.ConstantTimeCompare([]byte(stored), []byte(secret)) == 1
	}
	iter, salt, want, err := parseSecretHash(stored)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(deriveSecret(secret, salt, iter), want) == 1
}

func deriveSecret(secret string, salt []byte, iter int) []byte {
	k, err := pbkdf2.Key(sha256.New, secret, salt, iter, secretHashBytes)
	if err != nil { // only for parameters outside FIPS limits, which ours are not
		panic(fmt.Sprintf("pbkdf2: %v", err))
	}
	return k
}

func formatSecretHash(iter int, salt, hash []byte) string {
	enc := base64.RawURLEncoding
	return secretHashPrefix + strconv.Itoa(iter) + "$" + enc.EncodeToString(salt) + "$" + enc.EncodeToString(hash)
}

func parseSecretHash(s string) (iter int, salt, hash []byte, err error) {
	parts := strings.Split(strings.TrimPrefix(s, secretHashPrefix), "$")
	if len(parts) != 3 {
		return 0, nil, nil, fmt.Errorf("want %siterations$salt$hash", secretHashPrefix)
	}
	iter, err = strconv.Atoi(parts[0])
	if err != nil || iter < 1 || iter > 10_000_000 {
		return 0, nil, nil, fmt.Errorf("bad iteration count %q", parts[0])
	}
	enc := base64.RawURLEncoding
	if salt, err = enc.DecodeString(parts[1]); err != nil || len(salt) < 8 {
		return 0, nil, nil, fmt.Errorf("bad salt")
	}
	if hash, err = enc.DecodeString(parts[2]); err != nil || len(hash) != secretHashBytes {
		return 0, nil, nil, fmt.Errorf("bad hash")
	}
	return iter, salt, hash, nil
}

// checkSecret refuses a stored-form secret that does not parse (a clear
// secret has been hashed by normalize before validate runs).
func checkSecret(field, v string) error {
	if v == "" {
		return nil
	}
	if !IsHashedSecret(v) {
		return checkIndexable(field, v)
	}
	if _, _, _, err := parseSecretHash(v); err != nil {
		return invalid(field, "is not a valid secret hash: "+err.Error())
	}
	return nil
}

// checkKeySet checks the shape of an inline JWK set: a JSON object with a
// non-empty "keys" array of objects. The keys themselves are parsed when
// used.
func checkKeySet(field string, raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return invalid(field, "must be a JWK set ({\"keys\": [...]}): "+err.Error())
	}
	if len(set.Keys) == 0 {
		return invalid(field, "must hold at least one key")
	}
	return nil
}

// MigrateClientSecrets hashes the client secrets that releases keeping
// them in clear stored, and returns how many clients it rewrote. It is
// idempotent and cheap when there is nothing to do (one read of the
// ClientApplication records); run it whenever the store is opened or
// restored, since a backup taken by an older release brings clear secrets
// back. Until it has run, such a secret still verifies (see
// [VerifySecret]).
func (s *Store) MigrateClientSecrets(ctx context.Context) (int, error) {
	var clear []*ClientApplication
	err := s.kv.View(ctx, func(tx Txn) error {
		clear = clear[:0]
		return tx.Scan(recordTypePrefix("ClientApplication"), false, func(_, v []byte) error {
			r, err := decodeRecord("ClientApplication", v)
			if err != nil {
				return err
			}
			c := r.(*ClientApplication)
			if (c.Secret != "" && !IsHashedSecret(c.Secret)) || (c.RetiringSecret != "" && !IsHashedSecret(c.RetiringSecret)) {
				clear = append(clear, c)
			}
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("migrating client secrets: %w", err)
	}
	n := 0
	for _, c := range clear {
		// Conditional on the version read: a client changed meanwhile was
		// written by this release, hashed.
		_, err := s.Put(ctx, c, PutOptions{IfMatch: c.Meta.VersionID})
		switch {
		case errors.Is(err, ErrConflict):
		case err != nil:
			return n, fmt.Errorf("migrating the secret of client %s: %w", c.ID, err)
		default:
			n++
		}
	}
	return n, nil
}

package oauth

import (
	"context"
	"fmt"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
)

// KeyStore keeps the token-signing keys as JsonWebKey records in the store,
// so every replica sharing the store signs and verifies with the same keys.
type KeyStore struct {
	Store *store.Store
}

// Load returns every stored signing key.
func (k KeyStore) Load(ctx context.Context) ([]tokens.Key, error) {
	records, err := store.Search[store.JSONWebKey](ctx, k.Store, store.Filter{})
	if err != nil {
		return nil, fmt.Errorf("listing signing keys: %w", err)
	}
	keys := make([]tokens.Key, 0, len(records))
	for _, r := range records {
		key, err := tokens.KeyFromJWK(r.ID, map[string]string{
			"kty": r.Kty, "crv": r.Crv, "x": r.X, "y": r.Y, "d": r.D, "alg": r.Alg,
		})
		if err != nil {
			return nil, err
		}
		key.Active = r.Active
		key.Created = parseTime(r.Created)
		key.Retired = parseTime(r.Retired)
		keys = append(keys, key)
	}
	return keys, nil
}

// Changes moves whenever a key record is written, on this replica or (on
// PostgreSQL, through the change feed) another: tokens.Options.KeysChanged.
func (k KeyStore) Changes() uint64 { return k.Store.Changes("JsonWebKey") }

// KeyRecord is the JsonWebKey record that stores key.
func KeyRecord(key tokens.Key) (*store.JSONWebKey, error) {
	fields, err := key.MarshalJWK()
	if err != nil {
		return nil, err
	}
	r := &store.JSONWebKey{
		Active: key.Active, Alg: fields["alg"], Kty: fields["kty"], Crv: fields["crv"],
		X: fields["x"], Y: fields["y"], D: fields["d"], Use: "sig",
		Created: formatTime(key.Created), Retired: formatTime(key.Retired),
	}
	r.ID = key.ID
	return r, nil
}

// Save creates or replaces a signing key.
func (k KeyStore) Save(ctx context.Context, key tokens.Key) error {
	r, err := KeyRecord(key)
	if err != nil {
		return err
	}
	if _, err := k.Store.Put(ctx, r, store.PutOptions{}); err != nil {
		return fmt.Errorf("saving signing key %s: %w", key.ID, err)
	}
	return nil
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

package caddymodule

import (
	"context"
	"errors"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
)

// TestOpeningAStoreMigratesTheEmailIndex: a store written by a release that
// indexed emails under strings.ToLower holds "\u212Aate@a.test" under
// "kate@a.test". Opening it through the pool and starting a config on it
// moves the entry, so the user is found by its exact address and
// kate@a.test finds nobody.
func TestOpeningAStoreMigratesTheEmailIndex(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const kelvin = "\u212Aate@a.test"

	db, err := badgerkv.Open(badgerkv.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	u := &store.User{Email: kelvin}
	if err := store.New(db, store.Options{}).Create(ctx, u, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// The old release's index entry, in the store's key layout
	// (internal/store/keys.go): u/User.email/<strings.ToLower(email)>.
	err = db.Update(ctx, func(tx store.Txn) error {
		if err := tx.Delete([]byte("u/User.email/" + kelvin)); err != nil {
			return err
		}
		return tx.Set([]byte("u/User.email/kate@a.test"), []byte(u.ID), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	storage := &BadgerStorage{Dir: dir}
	if err := storage.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	h, err := openStore(ctx, storage, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = releaseStore(storage) })
	if err := h.recoverJobs(ctx, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	if got, err := h.store.UserByEmail(ctx, kelvin); err != nil || got.ID != u.ID {
		t.Fatalf("UserByEmail(%+q) after opening = %v, %v; want the migrated user", kelvin, got, err)
	}
	if _, err := h.store.UserByEmail(ctx, "kate@a.test"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UserByEmail(kate@a.test) = %v; want ErrNotFound", err)
	}
}

// Package storetest opens real stores for tests: Badger in a temporary
// directory, closed when the test ends. It is imported by tests only.
package storetest

import (
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
)

// Option adjusts what Open and OpenKV open.
type Option func(*config)

type config struct {
	badger badgerkv.Options
	store  store.Options
	wrap   func(store.KV) store.KV
}

// Badger adjusts the Badger options (Dir is the test's temporary
// directory unless set here).
func Badger(adjust func(*badgerkv.Options)) Option {
	return func(c *config) { adjust(&c.badger) }
}

// StoreOptions sets the store's options.
func StoreOptions(o store.Options) Option {
	return func(c *config) { c.store = o }
}

// WrapKV puts Open's store on wrap(kv) instead of the Badger itself, for
// a test that counts or alters what the store does with its KV. OpenKV
// ignores it.
func WrapKV(wrap func(store.KV) store.KV) Option {
	return func(c *config) { c.wrap = wrap }
}

// OpenKV opens Badger in a fresh temporary directory of tb and closes it
// when tb ends; a failure to open or close fails tb. Cleanups run last
// registered first, so an API that uses the store and is shut down in a
// cleanup registered after OpenKV is shut down before the store closes.
func OpenKV(tb testing.TB, opts ...Option) *badgerkv.KV {
	tb.Helper()
	c := apply(tb, opts)
	return openKV(tb, c)
}

// Open returns a store on Badger opened as OpenKV does.
func Open(tb testing.TB, opts ...Option) *store.Store {
	tb.Helper()
	c := apply(tb, opts)
	var kv store.KV = openKV(tb, c)
	if c.wrap != nil {
		kv = c.wrap(kv)
	}
	return store.New(kv, c.store)
}

func apply(tb testing.TB, opts []Option) *config {
	c := &config{}
	for _, o := range opts {
		o(c)
	}
	if c.badger.Dir == "" && !c.badger.InMemory {
		c.badger.Dir = tb.TempDir()
	}
	return c
}

func openKV(tb testing.TB, c *config) *badgerkv.KV {
	tb.Helper()
	kv, err := badgerkv.Open(c.badger)
	if err != nil {
		tb.Fatalf("opening badger: %v", err)
	}
	tb.Cleanup(func() {
		if err := kv.Close(); err != nil {
			tb.Errorf("closing badger: %v", err)
		}
	})
	return kv
}

package caddymodule

import (
	"context"
	"io"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/store"
)

// storageModule is what a module in the `fhirgate.storage` namespace
// provides: the key-value storage the fhirgate app keeps its store on.
// The modules are glue; the storage itself lives in Caddy-free packages
// (internal/store/badgerkv, internal/store/pgkv).
type storageModule interface {
	// storageKey names the storage so that the configs of one process
	// (a reload provisions the new config before the old one is cleaned
	// up) share one open handle: equal keys are the same storage. It
	// holds no secret.
	storageKey() string
	// openKV opens the storage; for PostgreSQL it also creates or
	// migrates the schema.
	openKV(ctx context.Context, logger *zap.Logger) (store.KV, error)
}

// backupKV is a storage that can write and load a backup stream. Both
// storages speak one format (Badger's backup stream), so a backup taken on
// one restores into the other.
type backupKV interface {
	store.KV
	Backup(w io.Writer) error
	Restore(r io.Reader) error
}

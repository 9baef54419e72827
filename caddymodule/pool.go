package caddymodule

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/botapi"
	"github.com/fhirgate/fhirgate/internal/store"
)

// stores holds one open Badger database per storage directory. Caddy
// provisions a new config before it stops the old one, and Badger locks its
// directory, so a reload must reuse the open handle instead of opening the
// directory a second time.
var stores = caddy.NewUsagePool()

// storeHandle is the pooled value: the open database and the store on it.
type storeHandle struct {
	db    *store.Badger
	store *store.Store

	recovery    sync.Once
	recoveryErr error
}

// recoverJobs marks as failed the async jobs left unfinished by the process
// that last had the directory, once per opening (a reload reuses the
// handle). It runs from Start, so `caddy validate` does not write.
func (h *storeHandle) recoverJobs(ctx context.Context, logger *zap.Logger) error {
	h.recovery.Do(func() {
		n, err := botapi.FailInterruptedJobs(ctx, h.store)
		if err != nil {
			h.recoveryErr = fmt.Errorf("recovering async jobs: %w", err)
			return
		}
		if n > 0 {
			logger.Warn("async bot jobs interrupted by a restart marked as failed", zap.Int("jobs", n))
		}
		migrateEmailIndex(h.store, logger)
		migrateClientSecrets(h.store, logger)
	})
	return h.recoveryErr
}

// Destruct closes the database when the last config using it is cleaned up.
func (h *storeHandle) Destruct() error {
	return h.db.Close()
}

// storeKey normalises a directory so that "./data" and "/srv/data" name the
// same pool entry.
func storeKey(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving storage directory %q: %w", dir, err)
	}
	return filepath.Clean(abs), nil
}

// openStore returns the pooled store for dir, opening it on first use.
func openStore(dir string, logger *zap.Logger) (*storeHandle, error) {
	key, err := storeKey(dir)
	if err != nil {
		return nil, err
	}
	val, _, err := stores.LoadOrNew(key, func() (caddy.Destructor, error) {
		db, err := store.OpenBadger(store.BadgerOptions{Dir: key, Logger: badgerLogger{logger.Sugar()}})
		if err != nil {
			return nil, err
		}
		// Opening the directory (not a reload, which reuses the handle)
		// means the process that ran any unfinished async job is gone:
		// recoverJobs marks them failed when a config starts, and migrates
		// the email index.
		return &storeHandle{db: db, store: store.New(db, store.Options{})}, nil
	})
	if err != nil {
		return nil, err
	}
	return val.(*storeHandle), nil
}

// migrateEmailIndex moves email index entries written by older releases
// (Unicode lower-casing) to the ASCII-only form. A failure is logged, not
// fatal: lookups verify the address, so an unmigrated entry folds nobody
// onto anybody; it only leaves that user unfindable by email.
func migrateEmailIndex(st *store.Store, logger *zap.Logger) {
	n, err := st.MigrateEmailIndex(context.Background())
	if n > 0 {
		logger.Info("email index entries migrated to ASCII-only case folding", zap.Int("users", n))
	}
	if err != nil {
		logger.Warn("migrating the email index", zap.Error(err))
	}
}

// migrateClientSecrets hashes client secrets an older release stored in
// clear. Not fatal: a clear secret still verifies until it is migrated.
func migrateClientSecrets(st *store.Store, logger *zap.Logger) {
	n, err := st.MigrateClientSecrets(context.Background())
	if n > 0 {
		logger.Info("client secrets stored in clear were hashed", zap.Int("clients", n))
	}
	if err != nil {
		logger.Warn("hashing client secrets", zap.Error(err))
	}
}

// releaseStore drops this config's use of the store for dir.
func releaseStore(dir string) error {
	key, err := storeKey(dir)
	if err != nil {
		return err
	}
	_, err = stores.Delete(key)
	return err
}

// badgerLogger sends Badger's log through zap. Badger narrates table
// loading and compaction at Info; that is detail to an operator, so it goes
// to Debug.
type badgerLogger struct{ s *zap.SugaredLogger }

func (l badgerLogger) Errorf(f string, a ...any)   { l.s.Errorf(f, a...) }
func (l badgerLogger) Warningf(f string, a ...any) { l.s.Warnf(f, a...) }
func (l badgerLogger) Infof(f string, a ...any)    { l.s.Debugf(f, a...) }
func (l badgerLogger) Debugf(f string, a ...any)   { l.s.Debugf(f, a...) }

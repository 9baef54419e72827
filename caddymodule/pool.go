package caddymodule

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/botapi"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/kvqueue"
	"github.com/fhirgate/fhirgate/internal/store"
)

// stores holds one open Badger database per storage directory. Caddy
// provisions a new config before it stops the old one, and Badger locks its
// directory, so a reload must reuse the open handle instead of opening the
// directory a second time.
var stores = caddy.NewUsagePool()

// storeHandle is the pooled value: the open database, the store on it and
// the durable job queue kept in it (async runs' leases).
type storeHandle struct {
	db    *store.Badger
	store *store.Store
	queue *kvqueue.Queue

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
		// The queue works until the directory is closed (Destruct), across
		// reloads; a job a dead process left running is rescued now.
		if err := h.queue.Start(ctx); err != nil {
			h.recoveryErr = fmt.Errorf("starting the job queue: %w", err)
			return
		}
		migrateEmailIndex(h.store, logger)
	})
	return h.recoveryErr
}

// Destruct stops the queue and closes the database when the last config
// using it is cleaned up. A job still running after the grace is stopped;
// it is rescued (run again, or for a lease failed) at the next start.
func (h *storeHandle) Destruct() error {
	ctx, cancel := context.WithTimeout(context.Background(), queueStopGrace)
	defer cancel()
	_ = h.queue.Stop(ctx)
	return h.db.Close()
}

// queueStopGrace bounds how long closing the store waits for running jobs.
const queueStopGrace = 10 * time.Second

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
		st := store.New(db, store.Options{})
		q := kvqueue.New(db, queue.Options{}, logger)
		if err := botapi.RegisterJobs(q, st, logger); err != nil {
			_ = db.Close()
			return nil, err
		}
		return &storeHandle{db: db, store: st, queue: q}, nil
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

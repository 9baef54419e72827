package caddymodule

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/botapi"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/subscription"
)

// stores holds one open storage per storage key (storageModule): Caddy
// provisions a new config before it stops the old one, Badger locks its
// directory, and a PostgreSQL pool is worth keeping, so a reload reuses the
// open handle instead of opening the storage a second time.
var stores = caddy.NewUsagePool()

// storeHandle is the pooled value: the open storage, the store on it and
// the durable job queue kept with it (async $execute runs).
type storeHandle struct {
	kv    store.KV
	store *store.Store
	queue queue.Queue
	// subs are the subscription engine's workers on queue.
	subs *subscription.Jobs
	// running is the config that last started on the storage: the one
	// whose handlers run queued async jobs.
	running atomic.Pointer[App]

	recovery    sync.Once
	recoveryErr error
}

// recoverJobs, once per opening (a reload reuses the handle), starts the
// job queue, which rescues what a dead process left running (a rescued
// async run is marked failed, not run again), and migrates what older
// releases stored. It runs from Start, so `caddy validate` does not write.
func (h *storeHandle) recoverJobs(ctx context.Context, logger *zap.Logger) error {
	h.recovery.Do(func() {
		// Before any bot runs: bots stored before bot identity keep
		// running as their caller.
		n, err := h.store.MigrateBotIdentity(ctx)
		if err != nil {
			h.recoveryErr = err
			return
		}
		if n > 0 {
			logger.Info("bots stored before bot identity keep running as their caller (runAsUser)", zap.Int("bots", n))
		}
		// The queue works until the directory is closed (Destruct), across
		// reloads; a job a dead process left running is rescued now.
		if err := h.queue.Start(ctx); err != nil {
			h.recoveryErr = fmt.Errorf("starting the job queue: %w", err)
			return
		}
		migrateEmailIndex(h.store, logger)
		migrateClientSecrets(h.store, logger)
	})
	return h.recoveryErr
}

// Destruct stops the queue and closes the storage when the last config
// using it is cleaned up. A job still running after the grace is stopped;
// it is rescued at the next start (run again, or, for an async $execute,
// failed).
func (h *storeHandle) Destruct() error {
	ctx, cancel := context.WithTimeout(context.Background(), queueStopGrace)
	defer cancel()
	_ = h.queue.Stop(ctx)
	return h.kv.Close()
}

// queueStopGrace bounds how long closing the store waits for running jobs.
const queueStopGrace = 10 * time.Second

// openStore returns the pooled store on storage, opening it on first use.
func openStore(ctx context.Context, storage storageModule, logger *zap.Logger) (*storeHandle, error) {
	val, _, err := stores.LoadOrNew(storage.storageKey(), func() (caddy.Destructor, error) {
		kv, err := storage.openKV(ctx, logger)
		if err != nil {
			return nil, err
		}
		// Opening the storage (not a reload, which reuses the handle)
		// means the process that ran any unfinished async job is gone:
		// recoverJobs marks them failed when a config starts, and migrates
		// the email index.
		st := store.New(kv, store.Options{})
		q, err := openQueue(ctx, kv, logger)
		if err != nil {
			_ = kv.Close()
			return nil, err
		}
		h := &storeHandle{kv: kv, store: st, queue: q}
		if err := botapi.RegisterJobs(q, st, h.asyncAPI, logger); err != nil {
			_ = kv.Close()
			return nil, err
		}
		subs, err := subscription.RegisterJobs(q)
		if err != nil {
			_ = kv.Close()
			return nil, err
		}
		if _, err := botapi.RegisterCron(q, st, botapi.CronOptions{API: h.cronAPI, OnTick: observeCronTick, Logger: logger}); err != nil {
			_ = kv.Close()
			return nil, err
		}
		h.subs = subs
		return h, nil
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

// releaseStore drops one use of the store on storage.
func releaseStore(storage storageModule) error {
	_, err := stores.Delete(storage.storageKey())
	return err
}

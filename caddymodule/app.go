// Package caddymodule plugs fhirgate into Caddy: the `fhirgate` app (the
// store, signing keys, bot runner and caches), the `http.handlers.fhirgate`
// middleware, the `admin.api.fhirgate` admin endpoints, the Caddyfile syntax
// and the `caddy fhirgate` command. It only translates configuration and
// HTTP; the logic lives in Caddy-free packages under internal/ and botrunner/.
package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
	"github.com/fhirgate/fhirgate/internal/userinfo"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the fhirgate app. It owns the embedded store (one Badger database
// per storage directory, shared across config reloads), and upserts the
// projects, clients, users and bots declared in the config when the config
// is loaded.
//
// A load is all or nothing. Provision opens the store, builds every
// declared record, checks it as the store would and compiles every
// declared bot, and writes nothing, so `caddy validate` never writes. Start
// writes what changed in one transaction; until then (Caddy starts apps in
// no fixed order) fhirgate's requests on this config wait for it. Any error
// refuses the load and leaves the store as it was; on a reload the old
// config keeps serving. `caddy validate` against the storage directory of a
// running instance meets Badger's directory lock and fails, saying so.
type App struct {
	// StorageDir is the directory of the embedded Badger store. It is
	// created if missing. Default: `fhirgate` under Caddy's data directory
	// (e.g. `~/.local/share/caddy/fhirgate`).
	StorageDir string `json:"storage_dir,omitempty"`

	// Issuer identifies this gateway as a token issuer: the `iss` claim of
	// every token, the only `iss` accepted, and the base URL of the
	// discovery metadata. Set it to the gateway's public URL, e.g.
	// `https://gw.example.com`; changing it invalidates issued tokens.
	// Default: `http://localhost` (with a warning).
	Issuer string `json:"issuer,omitempty"`

	// AccessTokenTTL is the access-token lifetime for clients that do not
	// set their own. Default: 1h.
	AccessTokenTTL caddy.Duration `json:"access_token_ttl,omitempty"`

	// RefreshTokenTTL is the refresh-token lifetime (and how long a
	// sign-in lasts) for clients that do not set their own. Default: 2w
	// (336h).
	RefreshTokenTTL caddy.Duration `json:"refresh_token_ttl,omitempty"`

	// UserinfoTimeout bounds each call to an identity provider's userinfo
	// endpoint, body included, unless the client sets its own. Default: 5s.
	UserinfoTimeout caddy.Duration `json:"userinfo_timeout,omitempty"`

	// UserinfoCacheTTL is how long a successful userinfo answer is reused
	// for the same subject token and client (keyed by a hash of the token,
	// never the token). Negative disables the cache. Default: 60s.
	UserinfoCacheTTL caddy.Duration `json:"userinfo_cache_ttl,omitempty"`

	// BotTimeout is the wall-clock limit of a bot run whose bot sets no
	// `timeout` of its own. It also stops code waiting after an `await`.
	// Default: 10s.
	BotTimeout caddy.Duration `json:"bot_timeout,omitempty"`

	// BotMaxConcurrent bounds simultaneous bot runs across all bots. Runs
	// beyond it wait up to `bot_queue_timeout` for a slot, then are answered
	// 429 with Retry-After. Default: 4 × the number of CPUs.
	BotMaxConcurrent int `json:"bot_max_concurrent,omitempty"`

	// BotQueueTimeout is how long a bot run waits for a free slot. Default: 1s.
	BotQueueTimeout caddy.Duration `json:"bot_queue_timeout,omitempty"`

	// BotIsolation says where bots run: `process` runs bots in worker
	// processes (this binary's hidden `caddy fhirgate bot-worker`
	// command), each serving one bot at a time (up to
	// `bot_runs_per_worker` concurrent runs of it), with a memory cap
	// (`bot_worker_memory`) and a hard kill at the deadline: a bot that
	// allocates without bound, or is stuck in a native call, loses its
	// worker and answers 400, and the gateway and other bots carry on. `inprocess` runs
	// bots inside the gateway, a little faster, where such a bot can take
	// the whole gateway down; only a heap watchdog (90% of GOMEMLIMIT,
	// which Caddy sets from the cgroup or system memory) stops the running
	// bots when the heap nears the limit. Workers start when runs need
	// them, up to `bot_max_concurrent`. Default: `process`.
	BotIsolation string `json:"bot_isolation,omitempty"`

	// BotWorkerMemory caps each bot worker process's memory, in bytes
	// (`process` isolation). A bot that reaches it gets a "memory limit
	// exceeded" error (400). Default: 256 MiB; at least 64 MiB.
	BotWorkerMemory int64 `json:"bot_worker_memory,omitempty"`

	// BotRunsPerWorker is how many concurrent runs of one bot a worker
	// process may take (`process` isolation). Different bots never share a
	// worker, and every run has a fresh JavaScript runtime; runs of the same
	// bot that share a worker share its memory cap and its fate: when one
	// exhausts the memory or is stuck past its deadline, the others answer
	// 400 too. Runs spread over one worker per CPU first; beyond that a
	// run joins a worker of its bot with room rather than an idle worker,
	// which is left to be reaped. 1 gives every run a process of its own,
	// at ~28 MiB per concurrent run. Default: 4.
	BotRunsPerWorker int `json:"bot_runs_per_worker,omitempty"`

	// AuditRetention is how long bot AuditEvents are kept. Default: 30 days
	// (720h).
	AuditRetention caddy.Duration `json:"audit_retention,omitempty"`

	// Projects are declared records, keyed by project id, that are created
	// or updated in the store every time the config loads (GitOps style).
	// Unchanged records are left untouched; records removed from the config
	// are not deleted (the admin API may manage them too).
	Projects map[string]*ProjectConfig `json:"projects,omitempty"`

	store    *storeHandle
	dir      string
	declared *declared
	keys     *pendingKeys
	ready    *loadState

	tokens *tokens.Service
	oauth  *oauth.Server
	runner botrunner.Executor
	logger *zap.Logger
	ctx    caddy.Context
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "fhirgate",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision opens the store and checks the declared projects; it writes
// nothing.
func (a *App) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	a.logger = ctx.Logger()
	a.ready = newLoadState()

	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}

	a.dir = a.StorageDir
	if a.dir == "" {
		a.dir = filepath.Join(caddy.AppDataDir(), "fhirgate")
	}
	h, err := openStore(a.dir, a.logger)
	if err != nil {
		return fmt.Errorf("opening store: %w", err)
	}
	a.store = h

	if a.declared, err = a.checkDeclared(ctx, h.store); err != nil {
		return err
	}
	if err := a.provisionBots(); err != nil {
		return err
	}
	return a.provisionAuth(ctx)
}

// Values of BotIsolation.
const (
	isolationProcess   = "process"
	isolationInProcess = "inprocess"
	defaultIsolation   = isolationProcess
)

// provisionBots creates the bot runner: a pool of worker processes or an
// in-process runner. Workers start on the first run, so provisioning (and
// `caddy validate`) starts no process.
func (a *App) provisionBots() error {
	opts := botrunner.Options{
		MaxConcurrent:  a.BotMaxConcurrent,
		QueueTimeout:   time.Duration(a.BotQueueTimeout),
		DefaultTimeout: time.Duration(a.BotTimeout),
	}
	isolation := a.BotIsolation
	if isolation == "" {
		isolation = defaultIsolation
	}
	switch isolation {
	case isolationInProcess:
		if a.BotWorkerMemory != 0 || a.BotRunsPerWorker != 0 {
			a.logger.Warn("bot_worker_memory and bot_runs_per_worker have no effect with bot_isolation inprocess")
		}
		a.runner = botrunner.New(opts)
		return nil
	case isolationProcess:
	default:
		return fmt.Errorf("invalid bot_isolation '%s': want %s or %s", a.BotIsolation, isolationProcess, isolationInProcess)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this executable to start bot workers: %w", err)
	}
	pool, err := botrunner.NewPool(botrunner.PoolOptions{
		Options:       opts,
		Command:       []string{exe, "fhirgate", botWorkerCommandName},
		WorkerMemory:  a.BotWorkerMemory,
		RunsPerWorker: a.BotRunsPerWorker,
		Logger:        a.logger.Named("bot_worker"),
	})
	if err != nil {
		return fmt.Errorf("bot workers: %w", err)
	}
	a.runner = pool
	return nil
}

// defaultIssuer is the issuer when none is configured.
const defaultIssuer = "http://localhost"

// provisionAuth loads the signing keys (creating the first one on a new
// store) and builds the token service and the OAuth server.
func (a *App) provisionAuth(ctx caddy.Context) error {
	issuer := a.Issuer
	if issuer == "" {
		issuer = defaultIssuer
		a.logger.Warn("issuer not set; tokens name "+defaultIssuer+" as their issuer",
			zap.String("hint", "set `issuer` in the fhirgate global option to the gateway's public URL"))
	}
	st := a.store.store
	var err error
	// Retired keys must verify as long as the longest token lives; the
	// default covers two weeks, a longer configured lifetime extends it.
	maxLife := max(tokens.DefaultMaxTokenLifetime, time.Duration(a.RefreshTokenTTL)+time.Hour, time.Duration(a.AccessTokenTTL)+time.Hour)
	a.keys = &pendingKeys{KeyStore: oauth.KeyStore{Store: st}}
	a.tokens, err = tokens.New(ctx, tokens.Options{Issuer: issuer, Keys: a.keys, MaxTokenLifetime: maxLife})
	if err != nil {
		return fmt.Errorf("loading signing keys: %w", err)
	}
	info := userinfo.New(userinfo.Options{
		DefaultTimeout:  time.Duration(a.UserinfoTimeout),
		DefaultCacheTTL: time.Duration(a.UserinfoCacheTTL),
		Observe:         observeUserinfo,
	})
	a.oauth, err = oauth.New(oauth.Options{
		Store:           st,
		Tokens:          a.tokens,
		UserInfo:        info,
		AccessTokenTTL:  time.Duration(a.AccessTokenTTL),
		RefreshTokenTTL: time.Duration(a.RefreshTokenTTL),
		Logger:          a.logger,
		OnToken:         observeToken,
		OnAuthFailure:   observeAuthFailure,
	})
	return err
}

// Start writes the declared records (and the first signing key of a new
// store) in one transaction. An error refuses the whole load: Caddy stops
// what it started of this config and, on a reload, keeps the old one.
func (a *App) Start() error {
	err := a.start()
	if err != nil {
		a.logger.Error("config load refused", zap.Error(err))
	}
	a.markReady(err)
	return err
}

func (a *App) start() error {
	// Before anything else writes: jobs a previous process left running.
	if err := a.store.recoverJobs(a.ctx, a.logger); err != nil {
		return err
	}
	if err := a.writeDeclared(a.ctx, a.store.store, a.declared, a.keys.take()); err != nil {
		return err
	}
	a.keys.written()
	return nil
}

// loadState is the outcome of writing a config's declared records: done
// is closed when Start has written them (err nil) or the load ended without
// them.
type loadState struct {
	done chan struct{}
	once sync.Once
	err  error
}

func newLoadState() *loadState { return &loadState{done: make(chan struct{})} }

// markReady releases the requests waiting for the declared records; the
// first outcome stands.
func (a *App) markReady(err error) {
	a.ready.once.Do(func() {
		a.ready.err = err
		close(a.ready.done)
	})
}

// declaredWait bounds how long a request waits for its config's declared
// records: Start writes them in one transaction right after the apps are
// provisioned, normally within milliseconds.
const declaredWait = 10 * time.Second

// awaitDeclared waits until Start has written the declared records. It
// returns an error when the load failed, was abandoned or takes longer
// than declaredWait.
func (a *App) awaitDeclared(ctx context.Context) error {
	select {
	case <-a.ready.done:
		return a.ready.err
	default:
	}
	t := time.NewTimer(declaredWait)
	defer t.Stop()
	select {
	case <-a.ready.done:
		return a.ready.err
	case <-t.C:
		return errors.New("the configuration is still loading")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop stops the app.
func (a *App) Stop() error { return nil }

// Cleanup stops the bot workers and releases this config's use of the
// store; the last user closes it.
func (a *App) Cleanup() error {
	if a.ready != nil {
		a.markReady(errors.New("the configuration was not started"))
	}
	if pool, ok := a.runner.(*botrunner.Pool); ok {
		_ = pool.Close() // runs still going finish on their workers, which then stop
	}
	if a.store == nil {
		return nil
	}
	a.store = nil
	return releaseStore(a.dir)
}

// Store returns the app's store.
func (a *App) Store() *store.Store { return a.store.store }

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)

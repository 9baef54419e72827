// Package caddymodule plugs fhirgate into Caddy: the `fhirgate` app (the
// store, signing keys, bot runner and caches), the `http.handlers.fhirgate`
// middleware, the `admin.api.fhirgate` admin endpoints, the Caddyfile syntax
// and the `caddy fhirgate` command. It only translates configuration and
// HTTP; the logic lives in Caddy-free packages under internal/ and botrunner/.
package caddymodule

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/egress"
	"github.com/fhirgate/fhirgate/internal/email"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
	"github.com/fhirgate/fhirgate/internal/userinfo"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the fhirgate app. It owns the store (on its storage module: one
// Badger directory or one PostgreSQL database, shared across config
// reloads), and upserts the
// projects, clients, users and bots declared in the config when the config
// is loaded.
//
// A load is all or nothing. Provision opens the store, builds every
// declared record, checks it as the store would and compiles every
// declared bot, and writes nothing, so `caddy validate` never writes. Start
// writes what changed in one transaction; until then (Caddy starts apps in
// no fixed order) fhirgate's requests on this config wait for it. Any error
// refuses the load and leaves the store as it was; on a reload the old
// config keeps serving. `caddy validate` against the Badger directory of a
// running instance meets Badger's directory lock and fails, saying so.
type App struct {
	// StorageRaw is the storage the store is kept on, a module in the
	// `fhirgate.storage` namespace named by `module`: `badger` (the
	// embedded default, BadgerStorage) or `postgres` (shared by several
	// replicas, PostgresStorage). Caddyfile: `storage <name> { … }`.
	// Default: `badger` in `storage_dir`.
	StorageRaw json.RawMessage `json:"storage,omitempty" caddy:"namespace=fhirgate.storage inline_key=module"`

	// StorageDir is short for `storage badger { dir <path> }`, and cannot
	// be combined with `storage`. Default: `fhirgate` under Caddy's data
	// directory (e.g. `~/.local/share/caddy/fhirgate`).
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

	// AllowShortAccessTokens accepts an `access_token_ttl` (here or on a
	// client) under 6 minutes. A default MedplumClient refreshes a token
	// 5 minutes before it expires (its `refreshGracePeriod`), so with a
	// shorter lifetime it sees every token as expired and refreshes in a
	// loop; with this option set, configure the clients with a smaller
	// `refreshGracePeriod`. Default: false, such a lifetime is a config
	// error.
	AllowShortAccessTokens bool `json:"allow_short_access_tokens,omitempty"`

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

	// BotProjectMaxConcurrent bounds the simultaneous bot runs of one
	// project, asynchronous runs included, so that another project always
	// finds a slot. A bot's `medplum.executeBot` runs on its caller's slot,
	// which waits for it. Queued runs are served in turn project by project,
	// and within a project user by user. Default: half of
	// `bot_max_concurrent`, at least 1. Negative (`off` in the Caddyfile), or
	// not below `bot_max_concurrent`: no bound but `bot_max_concurrent`, for a
	// gateway serving one project (with a warning).
	BotProjectMaxConcurrent int `json:"bot_project_max_concurrent,omitempty"`

	// BotQueueTimeout is how long a bot run waits for a free slot. Default: 1s.
	BotQueueTimeout caddy.Duration `json:"bot_queue_timeout,omitempty"`

	// BotShutdownGrace is how long bot runs may go on when Caddy exits
	// (SIGTERM, `caddy stop`) before they are stopped. A stopped synchronous
	// run is answered 400 saying so; a stopped async run's job is marked
	// failed with the same reason. Neither is run again: a bot with side
	// effects must not run twice for one request. A config reload never
	// waits for bots: their runs, async ones included, go on to their end.
	// Caddy's own `grace_period` still bounds other requests. Default: 10s.
	BotShutdownGrace caddy.Duration `json:"bot_shutdown_grace,omitempty"`

	// BotMaxTimeout bounds every bot run's wall-clock limit: a Bot whose
	// `timeout` is longer (up to the 900 s a Bot accepts) is stopped at
	// BotMaxTimeout. The Bot is stored as written. It must not be shorter
	// than `bot_timeout`. Default: 15m.
	BotMaxTimeout caddy.Duration `json:"bot_max_timeout,omitempty"`

	// BotIsolation says where bots run: `process` runs bots in worker
	// processes (this binary's hidden `caddy fhirgate bot-worker` command),
	// each serving one bot at a time (up to `bot_runs_per_worker` concurrent
	// runs of it), with a memory cap (`bot_worker_memory`) and a hard kill
	// at the deadline: a bot that allocates without bound, or is stuck in a
	// native call, loses its worker and answers 400, and the gateway and
	// other bots carry on. `inprocess` runs bots inside the gateway, a
	// little faster, with weaker bounds: a heap watchdog stops the running
	// bots when they together grow the heap by `bot_memory` (see there for
	// what it cannot bound); a run stuck in a native call past its deadline
	// is answered 1 s later and gives its slot back while its goroutine runs
	// on (while `bot_max_concurrent` such goroutines run, new runs are
	// answered 429). In both modes a regular expression call that backtracks
	// for 2 s throws a RangeError. Workers start when runs need them, up to
	// `bot_max_concurrent`. Default: `process`.
	BotIsolation string `json:"bot_isolation,omitempty"`

	// BotDefaultRuntime is the runtime of bots whose `runtimeVersion` is
	// empty (bots stored before runtimes existed too), as Medplum's
	// `defaultBotRuntimeVersion`: `awslambda` keeps a warm instance per bot
	// version, whose module top level runs once and whose handler serves
	// run after run, so module state may carry between runs of one bot
	// version (never across bots, versions or projects); `vmcontext` builds
	// a fresh runtime for every run. Default: `awslambda`.
	BotDefaultRuntime string `json:"bot_default_runtime,omitempty"`

	// BotMemory is the memory bots may use, in bytes. With `inprocess`
	// isolation it is a heap budget that all running bots share: the
	// watchdog stops every running bot with a "memory limit exceeded" error
	// (400) when the gateway's live heap passes its size with no bot running
	// (sampled) plus this budget. goja has no per-runtime accounting and the
	// watchdog can only interrupt JavaScript, so in process it cannot bound
	// what one native call allocates: an allocation is seen only once it
	// returns, and one that is larger than the machine's memory (`new
	// ArrayBuffer(2 ** 40)`, `'x'.repeat(2 ** 40)` or `.padEnd(2 ** 40)`, a
	// typed array of that size) ends the gateway with a fatal
	// out-of-memory error. The budget is also the bots' together, so one
	// bomb stops the other running bots too. `process` isolation bounds each
	// bot on its own and contains all of these to the bot's worker. With
	// `process` isolation this is the default of `bot_worker_memory`.
	// Default: 256 MiB.
	BotMemory int64 `json:"bot_memory,omitempty"`

	// BotWorkerMemory caps each bot worker process's memory, in bytes
	// (`process` isolation). A bot that reaches it gets a "memory limit
	// exceeded" error (400). Default: `bot_memory`, else 256 MiB; at least
	// 64 MiB.
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

	// BotCompileTimeout bounds compiling one bot's source (`$deploy`, a
	// declared bot's `source`). Compiles run in a short-lived child process
	// (this binary's `caddy fhirgate bot-worker` command), in either
	// `bot_isolation`, so source crafted to crash or stall the compiler
	// costs the gateway nothing: the process is killed at this limit, or
	// crashes on source nested too deeply, and the deploy is answered 400
	// saying why. A project runs at most 2 compiles at once and all
	// projects together one per CPU; a deploy that finds no slot within 5s
	// is answered 429 with Retry-After. Default: 10s.
	BotCompileTimeout caddy.Duration `json:"bot_compile_timeout,omitempty"`

	// AuditRetention is how long bot AuditEvents are kept. Default: 30 days
	// (720h).
	AuditRetention caddy.Duration `json:"audit_retention,omitempty"`

	// BotMaxCallsPerRequest bounds the bot runs one request causes: the
	// bot it runs plus every bot called from it, however deep or wide,
	// through `medplum.executeBot` (which is also bounded to 5 deep). A
	// call past it rejects inside the calling bot with an
	// OperationOutcomeError naming this limit, which the bot may catch.
	// Default: 100.
	BotMaxCallsPerRequest int `json:"bot_max_calls_per_request,omitempty"`

	// BotAsyncResultMax bounds, in bytes, the result an async run
	// (`Prefer: respond-async`) stores in its job; a larger result fails
	// the job with an error naming this limit. Default: 1 MiB.
	BotAsyncResultMax int64 `json:"bot_async_result_max,omitempty"`

	// ProjectBotRecordsMax is each project's quota, in bytes, of bot
	// records in the store: AuditEvents and async jobs, counted until they
	// expire. At the quota, async runs answer 429 with Retry-After and
	// AuditEvents are written to Caddy's log at Warn instead of the store
	// (counted in `caddy_fhirgate_bot_records_refused_total`). Replicas
	// on one PostgreSQL check it against the sum in the store, exactly.
	// Default: 256 MiB.
	ProjectBotRecordsMax int64 `json:"project_bot_records_max,omitempty"`

	// BotRecordsDiskReserve is the free space, in bytes, the store's disk
	// must keep for bot records to be written there; below it they are
	// refused as at the quota (async runs answer 503). It is larger than
	// the 16 MiB the store keeps for all writes, so a filling disk refuses
	// bot records long before sign-ins and token exchanges. Default: 256
	// MiB.
	BotRecordsDiskReserve int64 `json:"bot_records_disk_reserve,omitempty"`

	// Projects are declared records, keyed by project id, that are created
	// or updated in the store every time the config loads (GitOps style).
	// Unchanged records are left untouched; records removed from the config
	// are not deleted (the admin API may manage them too).
	Projects map[string]*ProjectConfig `json:"projects,omitempty"`

	// Email is the SMTP server bots send email through (medplum.sendEmail).
	Email *EmailConfig `json:"email,omitempty"`

	store    *storeHandle
	storage  storageModule
	declared *declared
	keys     *pendingKeys
	ready    *loadState

	tokens   *tokens.Service
	oauth    *oauth.Server
	egress   *egress.Egress
	runner   botrunner.Executor
	compiler *botrunner.Compiler
	// slots and executorKey are this config's uses of botSlots and
	// botExecutors (botpool.go).
	slots       *botrunner.Slots
	executorKey string
	logger      *zap.Logger
	ctx         caddy.Context
	// handlers are this config's fhirgate HTTP handlers, for runs with no
	// request of their own (requestless.go).
	handlers *handlerSet
	// mailer is this config's email sender (nil without an email block), shared by its bot
	// APIs so that a project's rate counts once per process (email.go).
	mailer *email.Sender
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
	a.handlers = new(handlerSet)
	a.ready = newLoadState()

	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}

	if err := a.checkTokenLifetimes(); err != nil {
		return err
	}
	mailer, err := a.emailSender()
	if err != nil {
		return err
	}
	a.mailer = mailer
	storage, err := a.loadStorage(ctx)
	if err != nil {
		return err
	}
	h, err := openStore(ctx, storage, a.logger)
	if err != nil {
		return fmt.Errorf("opening store: %w", err)
	}
	a.store, a.storage = h, storage
	a.egress = newEgress(h.store)

	if err := a.provisionCompiler(); err != nil {
		return err
	}
	if a.declared, err = a.checkDeclared(ctx, h.store); err != nil {
		return err
	}
	if err := checkBotRuntime("bot_default_runtime", a.BotDefaultRuntime); err != nil {
		return err
	}
	if err := a.provisionBots(); err != nil {
		return err
	}
	return a.provisionAuth(ctx)
}

// loadStorage loads the storage module, `storage_dir`'s Badger or, with
// neither set, Badger in the default directory.
func (a *App) loadStorage(ctx caddy.Context) (storageModule, error) {
	if a.StorageRaw == nil {
		s := &BadgerStorage{Dir: a.StorageDir}
		if err := s.Provision(ctx); err != nil {
			return nil, err
		}
		return s, nil
	}
	if a.StorageDir != "" {
		return nil, errors.New("storage and storage_dir both set: storage_dir is short for a badger storage's dir; keep one")
	}
	mod, err := ctx.LoadModule(a, "StorageRaw")
	if err != nil {
		return nil, fmt.Errorf("loading storage module: %w", err)
	}
	s, ok := mod.(storageModule)
	if !ok {
		return nil, fmt.Errorf("module %T is not a fhirgate storage", mod)
	}
	return s, nil
}

// Values of BotIsolation.
const (
	isolationProcess   = "process"
	isolationInProcess = "inprocess"
	defaultIsolation   = isolationProcess
)

// provisionCompiler creates the bot compiler, which starts a process per
// compile from this executable.
func (a *App) provisionCompiler() error {
	if a.BotCompileTimeout < 0 {
		return fmt.Errorf("invalid bot_compile_timeout '%v': must be positive", time.Duration(a.BotCompileTimeout))
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this executable to compile bots: %w", err)
	}
	a.compiler, err = botrunner.NewCompiler(botrunner.CompilerOptions{
		Command: []string{exe, "fhirgate", botWorkerCommandName},
		Timeout: time.Duration(a.BotCompileTimeout),
		Logger:  a.logger.Named("bot_compile"),
	})
	if err != nil {
		return fmt.Errorf("bot compiler: %w", err)
	}
	return nil
}

// provisionBots takes the bot runner, shared by all loaded configs (see
// botpool.go): a pool of worker processes or an in-process runner. Workers
// start on the first run, so provisioning (and `caddy validate`) starts no
// process.
func (a *App) provisionBots() error {
	if err := a.checkBotLimits(); err != nil {
		return err
	}
	slots, err := a.shareSlots()
	if err != nil {
		return err
	}
	opts := botrunner.Options{Slots: slots}
	isolation := a.BotIsolation
	if isolation == "" {
		isolation = defaultIsolation
	}
	switch isolation {
	case isolationInProcess:
		if a.BotWorkerMemory != 0 || a.BotRunsPerWorker != 0 {
			a.logger.Warn("bot_worker_memory and bot_runs_per_worker have no effect with bot_isolation inprocess")
		}
		if a.BotMemory < 0 {
			return fmt.Errorf("invalid bot_memory %d: must be positive", a.BotMemory)
		}
		opts.HeapBudget = a.BotMemory
		// In process, code not compiled by a Compiler is checked once in a
		// compile process; the runner keeps the compiler of the config that
		// created it.
		opts.Compiler = a.compiler
		key := fmt.Sprintf("%s heap=%d", isolation, a.BotMemory)
		return a.shareExecutor(key, func() (botrunner.Executor, error) { return botrunner.New(opts), nil })
	case isolationProcess:
	default:
		return fmt.Errorf("invalid bot_isolation '%s': want %s or %s", a.BotIsolation, isolationProcess, isolationInProcess)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this executable to start bot workers: %w", err)
	}
	// Worker settings cannot change under running workers: other values get
	// an executor of their own.
	memory := cmp.Or(a.BotWorkerMemory, a.BotMemory)
	key := fmt.Sprintf("%s memory=%d runs=%d", isolation, memory, a.BotRunsPerWorker)
	return a.shareExecutor(key, func() (botrunner.Executor, error) {
		pool, err := botrunner.NewPool(botrunner.PoolOptions{
			Options:       opts,
			Command:       []string{exe, "fhirgate", botWorkerCommandName},
			WorkerMemory:  memory,
			RunsPerWorker: a.BotRunsPerWorker,
			Logger:        a.logger.Named("bot_worker"),
		})
		if err != nil {
			return nil, fmt.Errorf("bot workers: %w", err)
		}
		return pool, nil
	})
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
	// KeysChanged: a key created or retired by another replica reaches this
	// one's keyring (the change feed on PostgreSQL).
	a.tokens, err = tokens.New(ctx, tokens.Options{Issuer: issuer, Keys: a.keys, MaxTokenLifetime: maxLife, KeysChanged: a.keys.Changes})
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
// store) in one transaction, then applies the config's bot run limits to
// the run slots all loaded configs share. An error refuses the whole load:
// Caddy stops what it started of this config and, on a reload, keeps the
// old one (and its limits).
func (a *App) Start() error {
	a.resolveRequestLess()
	err := a.start()
	if err != nil {
		a.logger.Error("config load refused", zap.Error(err))
	} else {
		a.startBots()
		a.store.running.Store(a) // queued async runs go to this config now
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

// Cleanup releases this config's use of the bot executor and the store; the
// last user of each closes it (runs still going finish on their workers,
// which then stop).
func (a *App) Cleanup() error {
	if a.ready != nil {
		a.markReady(errors.New("the configuration was not started"))
	}
	if err := a.cleanupBots(); err != nil && a.logger != nil {
		a.logger.Error("releasing the bot executor", zap.Error(err))
	}
	if a.store == nil {
		return nil
	}
	a.store.running.CompareAndSwap(a, nil)
	a.store = nil
	return releaseStore(a.storage)
}

// Store returns the app's store.
func (a *App) Store() *store.Store { return a.store.store }

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)

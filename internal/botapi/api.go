package botapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/deploy"
	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
)

// Defaults for Options.
const (
	DefaultMaxBody        = 1 << 20
	DefaultAuditRetention = 30 * 24 * time.Hour
	// DefaultMaxCallsPerRequest bounds the bot runs of one request.
	DefaultMaxCallsPerRequest = 100
	// DefaultAsyncResultMax bounds the result an async job stores.
	DefaultAsyncResultMax = 1 << 20
	// DefaultProjectRecordsMax is each project's quota of bot records.
	DefaultProjectRecordsMax = 256 << 20
	// DefaultRecordsDiskReserve is the free disk space below which bot
	// records are refused: far more than the store keeps for itself
	// (badgerkv.Open's 16 MiB reserve, which is all sign-ins need), so
	// a filling disk refuses bot records long before sign-ins.
	DefaultRecordsDiskReserve = 256 << 20
	// auditTailBytes is how much console output an AuditEvent keeps (the
	// end, where errors are), as Medplum does.
	auditTailBytes = 10 << 10
)

// Options configures an API. Store and Runner are required.
type Options struct {
	Store *store.Store
	// Runner runs the bots: in process (*botrunner.Runner) or in worker
	// processes (*botrunner.Pool).
	Runner botrunner.Executor
	// Compiler compiles $deploy's source (*botrunner.Compiler: in a child
	// process, bounded in time and per project).
	Compiler deploy.Compiler
	// Egress serves bots' fetch: each run's requests go through its
	// project's client (*egress.Egress). Nil: fetch rejects in every bot.
	Egress Egress
	// DefaultRuntime is the runtime of bots without a runtimeVersion
	// (botrunner.RuntimeAWSLambda or RuntimeVMContext). Empty means
	// botrunner.DefaultRuntime.
	DefaultRuntime string
	// MaxBody bounds $execute bodies in bytes; larger is 413. Zero means
	// DefaultMaxBody.
	MaxBody int64
	// AuditRetention is how long AuditEvents are kept. Zero means
	// DefaultAuditRetention.
	AuditRetention time.Duration
	// ShutdownGrace is how long Shutdown lets bot runs finish before it
	// stops them. Zero means DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// MaxCallsPerRequest bounds the bot runs one request causes: the bot
	// it runs plus every bot called, directly or not, through
	// medplum.executeBot; a call past it rejects in the calling bot. Zero
	// means DefaultMaxCallsPerRequest.
	MaxCallsPerRequest int
	// AsyncResultMax bounds, in bytes, the result an async job stores; a
	// larger result fails the job. Zero means DefaultAsyncResultMax.
	AsyncResultMax int
	// ProjectRecordsMax is each project's quota, in bytes, of bot records
	// in the store (AuditEvents and async jobs). At the quota, async runs
	// are refused (429) and AuditEvents are logged instead of stored.
	// Zero means DefaultProjectRecordsMax.
	ProjectRecordsMax int64
	// RecordsDiskReserve is the free space, in bytes, the store's disk
	// must keep for bot records to be written; below it they are refused
	// as at the quota. Zero means DefaultRecordsDiskReserve.
	RecordsDiskReserve uint64
	// Queue runs async $execute runs (AsyncKind jobs): any replica sharing
	// it may run a job another accepted, through the request-less route
	// (Backends). RegisterJobs must have registered the kind on it. Nil
	// runs async jobs in this process, on the accepting request's route;
	// they are lost if the process stops.
	Queue queue.Queue
	// Route names this API's place in the configuration (which site's
	// gate it serves), stored with each async job so that the replica
	// that runs it finds the same place (RegisterJobs' apis). Any stable
	// string; empty is a name too.
	Route string
	// Backends gives runs without an HTTP request (RunMessage, queued
	// async runs) their route to the FHIR backend, acting as the given
	// identity (gateway.Gateway.BackendFor). Nil: such runs have no
	// medplum client.
	Backends func(ctx context.Context, id *oauth.Identity) (*gateway.Backend, error)
	Logger   *zap.Logger
	// OnExecute observes every run: outcome ("success", "error",
	// "timeout", "busy"), run duration and queue wait.
	OnExecute func(outcome string, run, queueWait time.Duration)
	// OnRecordRefused observes a bot record the store refused: record is
	// "audit_event" or "async_job", reason "quota" or "disk".
	OnRecordRefused func(record, reason string)
	// Email sends the email of bots (medplum.sendEmail; *email.Sender). Nil: sendEmail is
	// answered 501, saying no SMTP server is configured.
	Email EmailSender
	// RunTokens issues the tokens of medplum.getAccessToken (*oauth.Server). Nil: getAccessToken
	// throws, saying the gateway does not issue them.
	RunTokens RunTokens
}

// API answers the bot operations.
type API struct {
	o     Options
	audit *auditWriter
	code  *codeCache
	bots  *botCache
	life  *lifecycle

	bodies *bodyMemory // request bodies held by runs
}

// New returns an API. Call Close (a config reload) or Shutdown (the
// process's exit) when it is no longer used.
func New(o Options) (*API, error) {
	if o.Store == nil || o.Runner == nil || o.Compiler == nil {
		return nil, errors.New("botapi: Store, Runner and Compiler are required")
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.AuditRetention <= 0 {
		o.AuditRetention = DefaultAuditRetention
	}
	if o.MaxCallsPerRequest <= 0 {
		o.MaxCallsPerRequest = DefaultMaxCallsPerRequest
	}
	if o.AsyncResultMax <= 0 {
		o.AsyncResultMax = DefaultAsyncResultMax
	}
	if o.ProjectRecordsMax <= 0 {
		o.ProjectRecordsMax = DefaultProjectRecordsMax
	}
	if o.RecordsDiskReserve == 0 {
		o.RecordsDiskReserve = DefaultRecordsDiskReserve
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.OnRecordRefused == nil {
		o.OnRecordRefused = func(string, string) {}
	}
	if o.OnExecute == nil {
		o.OnExecute = func(string, time.Duration, time.Duration) {}
	}
	audit := newAuditWriter(o.Store, o.recordOptions(o.AuditRetention), o.Logger, func(reason string) { o.OnRecordRefused("audit_event", reason) })
	return &API{o: o, audit: audit, code: newCodeCache(), bots: newBotCache(), bodies: newBodyMemory(), life: newLifecycle(o.ShutdownGrace)}, nil
}

// recordOptions are the store options of a bot record kept for ttl: the
// project's quota and the disk reserve.
func (o *Options) recordOptions(ttl time.Duration) store.PutOptions {
	return store.PutOptions{TTL: ttl, ProjectQuota: o.ProjectRecordsMax, DiskReserve: o.RecordsDiskReserve}
}

// Handler returns the handler for an authenticated request if the gate's
// reading of its path (gateway.Target) is one of the operations fhirgate
// answers itself (bots and async job status), or nil to let the request go
// on to the backend. It routes on the Target only: the path is read once,
// by the gate.
func (a *API) Handler(t gateway.Target) gateway.Operation {
	if !t.Under {
		return nil
	}
	seg := t.Segments
	switch {
	case t.Type == "job" && len(seg) == 3 && seg[2] == "status":
		return func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, _ *gateway.Backend) {
			a.serveJobStatus(w, r, id, t.ID)
		}
	case t.Type != "Bot":
		return nil
	case len(seg) == 1:
		return func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, _ *gateway.Backend) {
			a.serveBotType(w, r, id, t.Base)
		}
	case t.Operation == "$execute":
		// Any path may follow $execute, as on Medplum.
		return func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, be *gateway.Backend) {
			a.execute(w, r, id, be, t.Base, t.ID)
		}
	case len(seg) == 2 && t.ID != "":
		return func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, _ *gateway.Backend) {
			a.serveBot(w, r, id, t.ID)
		}
	case (len(seg) == 3 || len(seg) == 4) && t.ID != "" && seg[2] == "_history":
		return func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, _ *gateway.Backend) {
			a.serveBotHistory(w, r, id, t.Base, t.ID, seg[3:])
		}
	case len(seg) == 3 && t.Operation == "$deploy":
		return func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, _ *gateway.Backend) {
			a.serveDeploy(w, r, id, t.ID)
		}
	}
	// Every Bot path is fhirgate's: the backend knows nothing of bots.
	return func(w http.ResponseWriter, r *http.Request, _ *oauth.Identity, _ *gateway.Backend) {
		fhir.WriteOutcome(w, http.StatusNotFound, "fhirgate supports Bot read, vread, _history, search, create, update, delete, $deploy and $execute")
	}
}

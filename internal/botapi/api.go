package botapi

import (
	"errors"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/deploy"
	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// Defaults for Options.
const (
	DefaultMaxBody        = 1 << 20
	DefaultAuditRetention = 30 * 24 * time.Hour
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
	// FHIRBase is the FHIR API's path prefix, e.g. /fhir/R4.
	FHIRBase string
	// MaxBody bounds $execute bodies in bytes; larger is 413. Zero means
	// DefaultMaxBody.
	MaxBody int64
	// AuditRetention is how long AuditEvents are kept. Zero means
	// DefaultAuditRetention.
	AuditRetention time.Duration
	Logger         *zap.Logger
	// OnExecute observes every run: outcome ("success", "error",
	// "timeout", "busy"), run duration and queue wait.
	OnExecute func(outcome string, run, queueWait time.Duration)
}

// API answers the bot operations.
type API struct {
	o     Options
	audit *auditWriter
	code  *codeCache
	bots  *botCache
	jobs  sync.WaitGroup // async runs in flight
}

// New returns an API. Call Close to flush pending audit events.
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
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.OnExecute == nil {
		o.OnExecute = func(string, time.Duration, time.Duration) {}
	}
	o.FHIRBase = strings.TrimSuffix(o.FHIRBase, "/")
	return &API{o: o, audit: newAuditWriter(o.Store, o.AuditRetention, o.Logger), code: newCodeCache(), bots: newBotCache()}, nil
}

// Close waits for async runs to finish, then writes the audit events still
// queued and stops the writer.
func (a *API) Close() {
	a.jobs.Wait()
	a.audit.close()
}

// Handler returns the handler for an authenticated request if its path is
// one of the operations fhirgate answers itself (bots and async job
// status), or nil to let the request go on to the backend.
func (a *API) Handler(r *http.Request) gateway.Operation {
	rel, ok := strings.CutPrefix(path.Clean(r.URL.Path), a.o.FHIRBase+"/")
	if !ok {
		return nil
	}
	parts := strings.Split(rel, "/")
	var f gateway.Operation
	switch {
	case parts[0] == "job" && len(parts) == 3 && parts[2] == "status":
		f = func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, _ *gateway.Backend) {
			a.serveJobStatus(w, r, id, parts[1])
		}
	case parts[0] != "Bot":
		return nil
	case len(parts) == 1:
		f = func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, _ *gateway.Backend) {
			a.serveBotType(w, r, id)
		}
	case parts[1] == "$execute":
		f = func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, be *gateway.Backend) {
			a.execute(w, r, id, be, "")
		}
	case len(parts) == 2:
		f = func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, _ *gateway.Backend) {
			a.serveBot(w, r, id, parts[1])
		}
	case parts[2] == "$execute":
		f = func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, be *gateway.Backend) {
			a.execute(w, r, id, be, parts[1])
		}
	case parts[2] == "$deploy" && len(parts) == 3:
		f = func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, _ *gateway.Backend) {
			a.serveDeploy(w, r, id, parts[1])
		}
	default:
		// Every Bot path is fhirgate's: the backend knows nothing of bots.
		f = func(w http.ResponseWriter, r *http.Request, _ *oauth.Identity, _ *gateway.Backend) {
			fhir.WriteOutcome(w, http.StatusNotFound, "fhirgate supports Bot read, search, create, update, delete, $deploy and $execute")
		}
	}
	return f
}

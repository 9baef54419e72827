package botapi

import (
	"errors"
	"net/http"
	"path"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
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
	Store  *store.Store
	Runner *botrunner.Runner
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
}

// New returns an API. Call Close to flush pending audit events.
func New(o Options) (*API, error) {
	if o.Store == nil || o.Runner == nil {
		return nil, errors.New("botapi: Store and Runner are required")
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
	return &API{o: o, audit: newAuditWriter(o.Store, o.AuditRetention, o.Logger)}, nil
}

// Close writes the audit events still queued and stops the writer.
func (a *API) Close() { a.audit.close() }

// Handler returns the handler for an authenticated request if its path is
// a bot operation, or nil.
func (a *API) Handler(r *http.Request) gateway.Operation {
	rel, ok := strings.CutPrefix(path.Clean(r.URL.Path), a.o.FHIRBase+"/")
	if !ok {
		return nil
	}
	parts := strings.Split(rel, "/")
	if parts[0] != "Bot" || len(parts) < 2 {
		return nil
	}
	switch {
	case parts[1] == "$execute":
		return func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, be *gateway.Backend) {
			a.execute(w, r, id, be, "")
		}
	case len(parts) >= 3 && parts[2] == "$execute":
		botID := parts[1]
		return func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, be *gateway.Backend) {
			a.execute(w, r, id, be, botID)
		}
	}
	return nil
}

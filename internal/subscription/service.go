package subscription

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/authz"
	"github.com/fhirgate/fhirgate/internal/botapi"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/subscription/spec"
)

// Defaults for Options.
const (
	// DefaultMaxDepth bounds a chain of bots triggering each other.
	DefaultMaxDepth = 5
)

// Backend reaches the FHIR backend as someone (gateway.Backend).
type Backend interface {
	Do(ctx context.Context, method, path string, query url.Values, body []byte, header http.Header) (*gateway.BackendResponse, error)
}

// BackendFor returns a backend route without an HTTP request, as the
// identity (the request-less backend), for jobs run where no request of
// the write's is at hand (another replica, after a restart).
type BackendFor func(ctx context.Context, id *oauth.Identity) (Backend, error)

// HTTPClients gives the client that may reach a project's webhooks (the
// egress allow-list).
type HTTPClients interface {
	For(projectID string) (*http.Client, error)
}

// BotRunner runs a bot on a message, and records the AuditEvents of the
// deliveries that are not bot runs (webhooks, a bot its trigger chain
// stopped) the way a run's own is recorded: in the background, many per
// store transaction, within the audit retention and the project's bot
// records quota (botapi.API).
type BotRunner interface {
	RunMessage(ctx context.Context, m botapi.Message) (*botrunner.Result, error)
	RecordAudit(ev *store.AuditEvent)
}

// Options configures a Service. Store, Queue and Bots are required.
type Options struct {
	Store *store.Store
	Queue queue.Queue
	Bots  BotRunner
	// FHIRBase is the gateway's FHIR base. Default gateway.DefaultFHIRBase.
	FHIRBase string
	// Backends is the request-less backend the jobs reach the FHIR server
	// through, as the writer (required).
	Backends BackendFor
	// HTTPClients reaches webhooks; nil refuses URL endpoints at delivery.
	HTTPClients HTTPClients
	// SyncTriggers makes a watched write's answer wait until its trigger
	// is on disk; otherwise (queue.Job.Deferred) until it is committed,
	// which a crash of the process does not undo.
	SyncTriggers bool
	// MaxDepth bounds trigger chains. 0 means DefaultMaxDepth.
	MaxDepth int
	Logger   *zap.Logger
	// Observe counts events: "queued", "delivered", "failed", "retried",
	// "dropped", "lost".
	Observe func(event string)
	// ObserveLag is told how long after the write a delivery ran.
	ObserveLag func(time.Duration)
}

// Service is the subscription engine of one gateway handler.
type Service struct {
	o     Options
	authz *authz.Authorizer
	rules *ruleCache
}

// New returns a Service.
func New(o Options) (*Service, error) {
	if o.Store == nil || o.Queue == nil || o.Bots == nil || o.Backends == nil {
		return nil, errors.New("subscription: Store, Queue, Bots and Backends are required")
	}
	if o.FHIRBase == "" {
		o.FHIRBase = gateway.DefaultFHIRBase
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Observe == nil {
		o.Observe = func(string) {}
	}
	if o.ObserveLag == nil {
		o.ObserveLag = func(time.Duration) {}
	}
	az, err := authz.New(authz.Options{FHIRBase: o.FHIRBase})
	if err != nil {
		return nil, err
	}
	return &Service{o: o, authz: az, rules: newRuleCache(o.Store)}, nil
}

// backend returns a job's backend: the request-less route, as the
// writer.
func (s *Service) backend(ctx context.Context, id *oauth.Identity) (Backend, error) {
	return s.o.Backends(ctx, id)
}

// ruleCache keeps each project's compiled active Subscriptions, read
// again when the store says Subscriptions changed (on any replica). Every
// write, match and delivery asks it: on PostgreSQL a read of the
// Subscription per match and per delivery was a sixth of the engine's CPU.
type ruleCache struct {
	st *store.Store

	mu       sync.Mutex
	changes  uint64
	projects map[string]*projectRules
}

// projectRules are a project's active Subscriptions, compiled and as
// stored (by id), shared by the callers: read-only.
type projectRules struct {
	rules []*spec.Rule
	subs  map[string]*store.Subscription
}

func newRuleCache(st *store.Store) *ruleCache {
	return &ruleCache{st: st, projects: map[string]*projectRules{}}
}

// active returns the project's active rules.
func (c *ruleCache) active(ctx context.Context, project string) ([]*spec.Rule, error) {
	p, err := c.project(ctx, project)
	if err != nil {
		return nil, err
	}
	return p.rules, nil
}

// subscription returns the project's Subscription id and its rule while it
// is active, nil when it is not (or gone).
func (c *ruleCache) subscription(ctx context.Context, project, id string) (*store.Subscription, *spec.Rule, error) {
	p, err := c.project(ctx, project)
	if err != nil {
		return nil, nil, err
	}
	sub, ok := p.subs[id]
	if !ok {
		return nil, nil, nil
	}
	for _, r := range p.rules {
		if r.ID == id {
			return sub, r, nil
		}
	}
	return nil, nil, nil
}

func (c *ruleCache) project(ctx context.Context, project string) (*projectRules, error) {
	n := c.st.Changes("Subscription")
	c.mu.Lock()
	if n != c.changes {
		c.projects, c.changes = map[string]*projectRules{}, n
	}
	p, ok := c.projects[project]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	subs, err := store.Search[store.Subscription](ctx, c.st, store.Filter{Project: project})
	if err != nil {
		return nil, err
	}
	p = &projectRules{rules: []*spec.Rule{}, subs: map[string]*store.Subscription{}}
	for _, sub := range subs {
		r, err := spec.Compile(sub)
		if err == nil && r.Active {
			p.rules = append(p.rules, r)
			p.subs[sub.ID] = sub
		}
	}
	c.mu.Lock()
	if c.changes == n {
		c.projects[project] = p
	}
	c.mu.Unlock()
	return p, nil
}

// watches tells whether any active rule of the project is for typ and
// one of interactions.
func watches(rules []*spec.Rule, typ string, interactions ...string) bool {
	for _, r := range rules {
		if r.Criteria.Type != typ {
			continue
		}
		for _, i := range interactions {
			if r.Triggers(i) {
				return true
			}
		}
	}
	return false
}

// lazyBackend finds a job's backend on first use, so a job that needs
// none (the resource carried in it, criteria without parameters, an
// author with full access) runs where no route is: after a restart, or
// on another replica.
type lazyBackend struct {
	s      *Service
	writer writer
	be     Backend
}

// Do implements Backend.
func (l *lazyBackend) Do(ctx context.Context, method, path string, query url.Values, body []byte, header http.Header) (*gateway.BackendResponse, error) {
	if l.be == nil {
		be, err := l.s.backend(ctx, l.writer.identity())
		if err != nil {
			return nil, err
		}
		l.be = be
	}
	return l.be.Do(ctx, method, path, query, body, header)
}

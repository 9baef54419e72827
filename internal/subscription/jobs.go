package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fhirgate/fhirgate/internal/authz"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/subscription/spec"
)

// Job kinds.
const (
	// TriggerKind matches one write's changes against the Subscriptions,
	// runs the bots of the matches and enqueues the rest as DeliverKind.
	TriggerKind = "subscription.trigger"
	// DeliverKind delivers one change to one Subscription: a webhook, or a
	// bot its trigger could not start.
	DeliverKind = "subscription.deliver"
	// botDeliverAttempts bounds the attempts to start a bot (a bot that
	// ran and failed is not retried).
	botDeliverAttempts = 5
)

// Jobs are the queue workers of the subscription engine. They are
// registered once per queue (before it starts, for the life of the
// store) and work for the Service of the current configuration (Use).
type Jobs struct {
	current atomic.Pointer[Service]
}

// RegisterJobs registers the job kinds on q.
func RegisterJobs(q queue.Queue) (*Jobs, error) {
	j := &Jobs{}
	if err := q.Register(TriggerKind, j.trigger, queue.KindOptions{MaxAttempts: 10, Timeout: triggerTimeout}); err != nil {
		return nil, err
	}
	if err := q.Register(DeliverKind, j.deliver, queue.KindOptions{MaxAttempts: spec.MaxMaxAttempts, Timeout: 15 * time.Minute}); err != nil {
		return nil, err
	}
	return j, nil
}

// Use makes s the service the jobs work for (a config's handler).
func (j *Jobs) Use(s *Service) { j.current.Store(s) }

// Release stops using s, unless another service replaced it already.
func (j *Jobs) Release(s *Service) { j.current.CompareAndSwap(s, nil) }

var errNoService = errors.New("no gateway handler with subscriptions on is running")

func (j *Jobs) trigger(ctx context.Context, d *queue.Delivery) error {
	s := j.current.Load()
	if s == nil {
		return errNoService
	}
	var a triggerArgs
	if err := json.Unmarshal(d.Args, &a); err != nil {
		return nil // not ours to retry: malformed forever
	}
	return s.match(ctx, &a)
}

func (j *Jobs) deliver(ctx context.Context, d *queue.Delivery) error {
	s := j.current.Load()
	if s == nil {
		return errNoService
	}
	var a deliverArgs
	if err := json.Unmarshal(d.Args, &a); err != nil {
		return nil
	}
	// A retry of a bot delivery its trigger attempted goes on counting.
	return s.deliver(ctx, &a, d.Attempt+a.Attempted, d.MaxAttempts+a.Attempted)
}

// writer is the identity that made a write, kept in the jobs.
type writer struct {
	User    string `json:"user,omitempty"`
	Profile string `json:"profile,omitempty"`
	Client  string `json:"client,omitempty"`
	Scope   string `json:"scope,omitempty"`
	Patient string `json:"patient,omitempty"`
	Project string `json:"project"`
}

func writerOf(id *oauth.Identity) writer {
	return writer{User: id.UserID, Profile: id.Profile, Client: id.ClientID, Scope: id.Scope, Patient: id.Patient, Project: id.ProjectID}
}

func (w writer) identity() *oauth.Identity {
	return &oauth.Identity{UserID: w.User, Profile: w.Profile, ClientID: w.Client, Scope: w.Scope, Patient: w.Patient, ProjectID: w.Project}
}

// triggerArgs is a TriggerKind job: one write.
type triggerArgs struct {
	Route   string        `json:"route"`
	Project string        `json:"project"`
	Writer  writer        `json:"writer"`
	Changes []spec.Change `json:"changes"`
	Depth   int           `json:"depth,omitempty"`
	Trace   string        `json:"trace,omitempty"`
	At      time.Time     `json:"at"`
}

// deliverArgs is a DeliverKind job: one change to one Subscription.
type deliverArgs struct {
	Subscription string      `json:"subscription"`
	Route        string      `json:"route"`
	Writer       writer      `json:"writer"`
	Change       spec.Change `json:"change"`
	Depth        int         `json:"depth,omitempty"`
	Trace        string      `json:"trace,omitempty"`
	At           time.Time   `json:"at"`
	// Attempted counts the attempts made before this job's: 1 for a bot
	// delivery its trigger tried and could not start (deliverBots), so
	// that the job's first run is attempt 2.
	Attempted int `json:"attempted,omitempty"`

	// caller is Writer's identity when the trigger built it once for
	// all its bot deliveries (nil: built by callerIdentity). Not stored.
	caller *oauth.Identity
}

// callerIdentity is the writer's identity, whom a bot with runAsUser
// runs as.
func (a *deliverArgs) callerIdentity() *oauth.Identity {
	if a.caller != nil {
		return a.caller
	}
	return a.Writer.identity()
}

// match evaluates every change against the project's active rules, then
// delivers the matches: webhooks through DeliverKind jobs (they wait on
// networks), bots here (deliverBots). All the matching comes first, so a
// matching error (the trigger is retried) has delivered nothing yet.
func (s *Service) match(ctx context.Context, a *triggerArgs) error {
	rules, err := s.rules.active(ctx, a.Project)
	if err != nil {
		return err
	}
	var hooks []queue.Job
	var bots []botDelivery
	// One route to the backend for the whole write: every match reads
	// as its writer.
	be := &lazyBackend{s: s, writer: a.Writer}
	for ci := range a.Changes {
		c := &a.Changes[ci]
		for _, r := range rules {
			if r.Criteria.Type != c.Type || !r.Triggers(c.Interaction) {
				continue
			}
			ok, err := s.matches(ctx, be, r, c)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if r.Endpoint.Bot != "" {
				bots = append(bots, botDelivery{rule: r, change: c})
				continue
			}
			da := a.deliverArgs(r, c)
			j, err := deliveryJob(r, &da)
			if err != nil {
				return err
			}
			hooks = append(hooks, j)
		}
	}
	if err := s.enqueueAll(ctx, hooks); err != nil {
		return err // retried; the deliveries already enqueued are unique
	}
	return s.deliverBots(ctx, a, bots)
}

// deliverArgs is the delivery of change c of this write to rule r.
func (a *triggerArgs) deliverArgs(r *spec.Rule, c *spec.Change) deliverArgs {
	return deliverArgs{Subscription: r.ID, Route: a.Route, Writer: a.Writer, Change: *c, Depth: a.Depth, Trace: a.Trace, At: a.At}
}

// deliveryJob is the DeliverKind job of a delivery. It is unique per
// Subscription, resource version and write, so a trigger run again does
// not enqueue it twice.
func deliveryJob(r *spec.Rule, a *deliverArgs) (queue.Job, error) {
	raw, err := json.Marshal(a)
	if err != nil {
		return queue.Job{}, err
	}
	attempts := r.MaxAttempts
	if r.Endpoint.Bot != "" {
		attempts = botDeliverAttempts - a.Attempted
	}
	c := &a.Change
	key := fmt.Sprintf("%s|%s|%s|%s|%s", r.ID, c.Interaction, c.Ref(), c.Version, a.Route)
	// Deferred: the trigger completes after this commit, so a crash of
	// the machine that loses the deliveries loses its outcome too, and it
	// runs again.
	return queue.Job{Kind: DeliverKind, Args: raw, UniqueKey: key, MaxAttempts: attempts, Deferred: true}, nil
}

// enqueueBatch bounds the jobs enqueued in one commit (a store
// transaction has a size limit; a transaction bundle can match many).
const enqueueBatch = 64

// enqueueAll enqueues jobs in commits of up to enqueueBatch: one commit
// for the deliveries of a write instead of one each. A retry after
// a partial failure enqueues the rest (the keys are unique).
func (s *Service) enqueueAll(ctx context.Context, jobs []queue.Job) error {
	for chunk := range slices.Chunk(jobs, enqueueBatch) {
		if err := s.o.Queue.EnqueueBatch(ctx, chunk); err != nil {
			return err
		}
	}
	return nil
}

// matches decides one rule for one change: its parameters by the
// backend's own search, then the author's right to read the resource.
func (s *Service) matches(ctx context.Context, be Backend, r *spec.Rule, c *spec.Change) (bool, error) {
	switch {
	case r.Criteria.Query == "":
	case c.Interaction == spec.Delete:
		// Decided before the delete, while the backend could still find it.
		if !slices.Contains(c.Matched, r.ID) {
			return false, nil
		}
	default:
		ok, err := countMatches(ctx, be, r, c.Type, c.ID)
		if err != nil || !ok {
			return false, err
		}
	}
	return s.authorMayRead(ctx, be, r, c)
}

// countMatches asks the backend whether resource typ/id matches the
// rule's parameters: a count-only search with its _id.
func countMatches(ctx context.Context, be Backend, r *spec.Rule, typ, id string) (bool, error) {
	resp, err := be.Do(ctx, http.MethodGet, typ, r.Criteria.MatchQuery(id), nil, nil)
	if err != nil {
		return false, err
	}
	if resp.Status != http.StatusOK {
		return false, fmt.Errorf("matching %s/%s: the backend answered %d", typ, id, resp.Status)
	}
	var b struct {
		Total *int `json:"total"`
	}
	if json.Unmarshal(resp.Body, &b) != nil || b.Total == nil {
		return false, fmt.Errorf("matching %s/%s: the backend's count has no total", typ, id)
	}
	return *b.Total > 0, nil
}

// authorMayRead tells whether the Subscription's author may read the
// resource under the gate's rules: a webhook never carries what its
// author could not read.
func (s *Service) authorMayRead(ctx context.Context, be Backend, r *spec.Rule, c *spec.Change) (bool, error) {
	sub, _, err := s.rules.subscription(ctx, r.Project, r.ID)
	if err != nil {
		return false, err
	}
	if sub == nil || sub.Author == nil {
		return false, nil
	}
	acc := s.authz.Access(sub.Author.Scope, sub.Author.Patient)
	dec := s.authz.Decide(acc, &authz.Request{Method: http.MethodGet, Segments: []string{c.Type, c.ID}, Header: http.Header{}})
	if dec.Denied != nil {
		return false, nil
	}
	if !dec.CheckResponse {
		// As the gate: only a patient context checks the answer (against
		// its compartment); a user/ scope that may read the type reads it all.
		return true, nil
	}
	body := []byte(c.Resource)
	if body == nil {
		resp, err := be.Do(ctx, http.MethodGet, c.Ref(), nil, nil, nil)
		if err != nil {
			return false, err
		}
		if resp.Status != http.StatusOK {
			return false, nil
		}
		body = resp.Body
	}
	return acc.CheckResponse(body) == nil, nil
}

package subscription

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/botapi"
	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/subscription/spec"
)

// webhookTimeout bounds one POST to a webhook.
const webhookTimeout = 30 * time.Second

// deliver runs one delivery attempt. A nil error ends the job (delivered,
// dropped, or a bot that ran and failed); an error retries it.
func (s *Service) deliver(ctx context.Context, a *deliverArgs, attempt, maxAttempts int) error {
	sub, r, err := s.rules.subscription(ctx, a.Writer.Project, a.Subscription)
	if err != nil {
		return err
	}
	if sub == nil { // gone, switched off, or no longer valid
		s.o.Observe("dropped")
		return nil
	}
	if a.Depth >= s.o.MaxDepth {
		s.audit(sub, a, "8", fmt.Sprintf("trigger chain deeper than %d: not delivered", s.o.MaxDepth))
		s.o.Observe("dropped")
		return nil
	}
	resource, ok, err := s.version(ctx, a, attempt)
	if err != nil {
		return err
	}
	if !ok {
		s.o.Observe("dropped") // the resource moved on or is gone
		return nil
	}
	if attempt == 1 {
		s.o.ObserveLag(time.Since(a.At))
	}
	if r.Endpoint.Bot != "" {
		return s.runBot(ctx, sub, r, a, resource)
	}
	return s.postWebhook(ctx, sub, r, a, resource, attempt, maxAttempts)
}

// version returns the version to deliver: the one that triggered. A
// retry whose resource has moved on (or is gone) is dropped (ok false).
func (s *Service) version(ctx context.Context, a *deliverArgs, attempt int) (json.RawMessage, bool, error) {
	c := a.Change
	if c.Interaction == spec.Delete {
		if c.Resource == nil {
			// Deleted before it could be read: only the reference is known.
			return json.RawMessage(fmt.Sprintf(`{"resourceType":%q,"id":%q}`, c.Type, c.ID)), true, nil
		}
		return c.Resource, true, nil
	}
	if attempt == 1 && c.Resource != nil {
		return c.Resource, true, nil
	}
	be, err := s.backend(ctx, a.Writer.identity())
	if err != nil {
		return nil, false, err
	}
	resp, err := be.Do(ctx, http.MethodGet, c.Ref(), nil, nil, nil)
	if err != nil {
		return nil, false, err
	}
	switch {
	case resp.Status == http.StatusNotFound || resp.Status == http.StatusGone:
		return nil, false, nil
	case resp.Status != http.StatusOK:
		return nil, false, fmt.Errorf("reading %s: the backend answered %d", c.Ref(), resp.Status)
	}
	var cur struct {
		Meta struct {
			VersionID string `json:"versionId"`
		} `json:"meta"`
	}
	_ = json.Unmarshal(resp.Body, &cur)
	if c.Version == "" || cur.Meta.VersionID == c.Version {
		return resp.Body, true, nil
	}
	if attempt > 1 {
		return nil, false, nil // moved on: Medplum drops such a retry
	}
	resp, err = be.Do(ctx, http.MethodGet, c.Ref()+"/_history/"+c.Version, nil, nil, nil)
	if err != nil {
		return nil, false, err
	}
	if resp.Status != http.StatusOK {
		return nil, false, nil
	}
	return resp.Body, true, nil
}

// runBot runs the Subscription's bot on the resource. A bot that ran and
// failed is recorded (its AuditEvent), not retried; a bot that could not
// start (busy, shutting down) is retried.
func (s *Service) runBot(ctx context.Context, sub *store.Subscription, r *spec.Rule, a *deliverArgs, resource json.RawMessage) error {
	body := spec.Body(true, a.Change.Interaction, resource)
	contentType := "application/fhir+json"
	if a.Change.Interaction == spec.Delete {
		// {"deletedResource": …} is JSON, not a FHIR resource: the bot's
		// input parser would refuse it as one.
		contentType = "application/json"
	}
	ref := a.Change.Ref()
	m := botapi.Message{
		Project:     sub.Meta.Project,
		Bot:         "Bot/" + r.Endpoint.Bot,
		ContentType: contentType,
		Body:        body,
		Header:      r.Headers(a.Change.Interaction, ref, body, a.Trace),
		TraceID:     a.Trace,
		// A bot with runAsUser runs as the writer (Medplum: the
		// resource's meta.author); others run as themselves.
		Caller: a.callerIdentity(),
		// The run's AuditEvent names the Subscription and the resource,
		// as Medplum's does.
		Entity: []store.Reference{{Reference: "Subscription/" + sub.ID}, {Reference: ref}},
	}
	res, err := s.o.Bots.RunMessage(WithDepth(ctx, a.Depth+1), m)
	if err != nil {
		if fe := fhir.AsError(err); fe != nil && fe.Status >= 400 && fe.Status < 500 && fe.Status != http.StatusTooManyRequests {
			// Not found, input refused: running again changes nothing.
			s.audit(sub, a, "8", "the Subscription's bot did not run: "+fe.Message)
			s.o.Observe("failed")
			return nil
		}
		s.o.Observe("retried")
		return fmt.Errorf("starting Bot/%s: %w", r.Endpoint.Bot, err)
	}
	if res.Outcome != botrunner.OutcomeSuccess {
		s.o.Observe("failed")
		return nil
	}
	s.o.Observe("delivered")
	return nil
}

// postWebhook POSTs the resource to the Subscription's URL. A status the
// rule does not count as success is retried; the last failed attempt
// switches the Subscription off with the reason in Subscription.error.
func (s *Service) postWebhook(ctx context.Context, sub *store.Subscription, r *spec.Rule, a *deliverArgs, resource json.RawMessage, attempt, maxAttempts int) error {
	body := spec.Body(false, a.Change.Interaction, resource)
	why := s.post(ctx, sub.Meta.Project, r, a, body)
	if why == "" {
		s.audit(sub, a, "0", fmt.Sprintf("Attempt %d delivered", attempt))
		s.o.Observe("delivered")
		return nil
	}
	s.audit(sub, a, "4", fmt.Sprintf("Attempt %d: %s", attempt, why))
	if attempt < maxAttempts {
		s.o.Observe("retried")
		return errors.New(why)
	}
	s.o.Observe("failed")
	s.switchOff(ctx, sub.ID, fmt.Sprintf("delivery failed %d times; last: %s", attempt, why))
	return nil
}

// post sends one request and returns why it failed, or "".
func (s *Service) post(ctx context.Context, project string, r *spec.Rule, a *deliverArgs, body []byte) string {
	if s.o.HTTPClients == nil {
		return "webhooks are not enabled (no egress client)"
	}
	client, err := s.o.HTTPClients.For(project)
	if err != nil {
		return "no egress for the project: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, webhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.Endpoint.URL, bytes.NewReader(body))
	if err != nil {
		return "the endpoint is not a valid URL"
	}
	req.Header = r.Headers(a.Change.Interaction, a.Change.Ref(), body, a.Trace)
	resp, err := client.Do(req)
	if err != nil {
		return "request failed: " + err.Error()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if !r.Succeeded(resp.StatusCode) {
		return fmt.Sprintf("received status %d", resp.StatusCode)
	}
	return ""
}

// switchOff sets a failing Subscription's status to off with the reason.
func (s *Service) switchOff(ctx context.Context, id, reason string) {
	for range 3 { // a concurrent edit conflicts: read again
		sub, err := store.Get[store.Subscription](ctx, s.o.Store, id)
		if err != nil {
			return
		}
		if sub.Status != "active" {
			return
		}
		sub.Status, sub.Error = "off", reason
		if _, err := s.o.Store.Put(ctx, sub, store.PutOptions{IfMatch: sub.Meta.VersionID}); err == nil {
			s.o.Logger.Warn("subscription switched off after failed deliveries", zap.String("subscription", id), zap.String("reason", reason))
			return
		} else if !errors.Is(err, store.ErrConflict) {
			s.o.Logger.Error("switching a failing subscription off", zap.String("subscription", id), zap.Error(err))
			return
		}
	}
}

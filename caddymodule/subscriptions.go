package caddymodule

import (
	"context"
	"fmt"

	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/subscription"
)

// provisionSubscriptions builds the handler's subscription engine, makes
// it the one the store's queue workers serve, and hooks it into the
// gateway: Subscription requests are answered by it, writes are watched.
func (h *Handler) provisionSubscriptions(app *App, opts *gateway.Options) error {
	if err := checkSubscriptionDurability(h.SubscriptionDurability); err != nil {
		return err
	}
	svc, err := subscription.New(subscription.Options{
		Store:    app.Store(),
		Queue:    app.store.queue,
		Bots:     h.bots.API,
		FHIRBase: h.FHIRBase,
		Backends: func(ctx context.Context, id *oauth.Identity) (subscription.Backend, error) {
			// A nil *gateway.Backend in the interface would not be nil.
			be, err := app.backendFor(ctx, id)
			if err != nil {
				return nil, err
			}
			return be, nil
		},
		// Webhooks reach only what each project's egress allow-list allows.
		HTTPClients:  app.Egress(),
		SyncTriggers: h.SubscriptionDurability == durabilitySync,
		Logger:       h.logger.Named("subscriptions"),
		Observe:      observeSubscription,
		ObserveLag:   observeSubscriptionLag,
	})
	if err != nil {
		return err
	}
	// The jobs are the store handle's, kept here: the app may be cleaned
	// up (its store handle dropped) before this handler is.
	h.subs, h.subJobs = svc, app.store.subs
	h.subJobs.Use(svc)
	opts.Writes = svc
	bots := opts.Operations
	opts.Operations = func(t gateway.Target) gateway.Operation {
		if op := svc.Handler(t); op != nil {
			return op
		}
		return bots(t)
	}
	return nil
}

// The values of subscription_durability.
const (
	durabilityDeferred = "deferred"
	durabilitySync     = "sync"
)

func checkSubscriptionDurability(v string) error {
	switch v {
	case "", durabilityDeferred, durabilitySync:
		return nil
	}
	return fmt.Errorf("invalid subscription_durability %q: must be deferred or sync", v)
}

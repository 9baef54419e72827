package botapi

import (
	"context"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// botIdentity is whom a bot acts as when it runs as itself (Medplum's
// default; always for MLLP and cron runs): profile Bot/{id} in its
// project, with its membership's scope — without a membership or scope,
// the project's full access (an empty scope) — confined like every
// identity by the gateway's backend_tenant. A bot has no user and no
// client of its own, so those identity headers are empty.
func botIdentity(bot *store.Bot, member *store.ProjectMembership) *oauth.Identity {
	id := &oauth.Identity{ProjectID: bot.Meta.Project, Profile: "Bot/" + bot.ID}
	if member != nil {
		id.Scope, id.MembershipID = member.Scope, member.ID
	}
	return id
}

// botMembership is the bot's membership in its project (user Bot/{id}),
// as Medplum keeps one per bot: the first active one by id, else the
// first inactive one; nil when it has none.
func botMembership(ctx context.Context, st *store.Store, bot *store.Bot) (*store.ProjectMembership, error) {
	ms, err := st.MembershipsByProjectUser(ctx, bot.Meta.Project, "Bot/"+bot.ID)
	if err != nil || len(ms) == 0 {
		return nil, err
	}
	for _, m := range ms {
		if m.IsActive() {
			return m, nil
		}
	}
	return ms[0], nil
}

// backendFor is how a run acting as runAs reaches the FHIR backend: the
// request's own route when there is one (a bot running as itself swaps
// only the identity), else the request-less route (Options.Backends). Nil
// when there is neither: the bot then has no medplum client, and its
// calls are refused with an outcome that says so.
func (a *API) backendFor(ctx context.Context, reqBackend *gateway.Backend, runAs *oauth.Identity) *gateway.Backend {
	if reqBackend != nil {
		return reqBackend.As(runAs)
	}
	if a.o.Backends == nil {
		return nil
	}
	be, err := a.o.Backends(ctx, runAs)
	if err != nil {
		a.o.Logger.Warn("no backend route for a run without a request", zap.Error(err))
		return nil
	}
	return be
}

package botapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/store"
)

// auditBackendTimeout bounds writing a run's AuditEvent to the backend.
const auditBackendTimeout = 10 * time.Second

// sendAudit sends a run's AuditEvent where the bot's auditEventDestination
// says, besides the gateway's store (which keeps every event for the admin
// API whatever the destination): "resource" creates it on the FHIR backend
// through the run's backend route, as the run's medplum calls reach it,
// so AuditEvent?entity=Bot/{id} finds it there; "log" writes it to the
// log. Medplum writes the event before answering, and so does this: only
// bots that ask for it pay the backend's round trip. It must be called
// before the event is queued for the store, which stamps it.
func (a *API) sendAudit(ctx context.Context, bot *store.Bot, be *gateway.Backend, ev *store.AuditEvent) {
	if ev == nil {
		return
	}
	if slices.Contains(bot.AuditEventDestination, "log") {
		fields := append(auditFields(ev), zap.String("outcome_desc", ev.OutcomeDesc))
		a.o.Logger.Info("bot audit event", fields...)
	}
	if !slices.Contains(bot.AuditEventDestination, "resource") {
		return
	}
	if be == nil {
		a.o.Logger.Warn("bot audit event not written to the backend: this run has no backend route", auditFields(ev)...)
		return
	}
	body, err := json.Marshal(backendAuditEvent(ev))
	if err != nil {
		a.o.Logger.Error("encoding a bot audit event for the backend", zap.Error(err))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditBackendTimeout)
	defer cancel()
	resp, err := be.Do(ctx, http.MethodPost, "AuditEvent", nil, body, http.Header{"Content-Type": {fhir.ContentType}})
	switch {
	case err != nil:
		a.o.Logger.Warn("bot audit event not written to the backend", append(auditFields(ev), zap.Error(err))...)
	case resp.Status/100 != 2:
		a.o.Logger.Warn("bot audit event refused by the backend", append(auditFields(ev), zap.Int("status", resp.Status))...)
	}
}

// backendAudit is an AuditEvent without meta: the backend keeps its own,
// and meta.project means nothing to it. (The field shadows the event's.)
type backendAudit struct {
	*store.AuditEvent
	Meta *struct{} `json:"meta,omitempty"`
}

// backendAuditEvent is the copy of ev written to the backend: no meta,
// recorded set, and an agent, which FHIR requires: the bot itself when
// nobody asked for the run.
func backendAuditEvent(ev *store.AuditEvent) backendAudit {
	out := *ev
	out.ResourceType = "AuditEvent"
	out.ID = ""
	if out.Recorded == "" {
		out.Recorded = store.FormatTime(time.Now())
		if out.Period != nil && out.Period.End != "" {
			out.Recorded = out.Period.End
		}
	}
	if len(out.Agent) == 0 {
		out.Agent = []store.AuditEventAgent{{Who: out.Source.Observer, Requestor: false}}
	}
	return backendAudit{AuditEvent: &out}
}

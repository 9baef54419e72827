package botapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// Message is a bot's input that arrived outside HTTP: an HL7 v2 message
// over MLLP, a Subscription's resource, a cron tick.
type Message struct {
	// Project is the project whose bot runs.
	Project string
	// Bot names the bot: "Bot/{id}", or an identifier "system|value" (or
	// a bare value) as $execute's identifier parameter.
	Bot string
	// ContentType and Body are the bot's input, unparsed.
	ContentType string
	Body        []byte
	// Header holds what the bot's event.headers show (nil: none).
	Header  http.Header
	TraceID string
	// Caller is whom a bot with runAsUser runs as, and the run's
	// requester: for a Subscription run, the writer of the resource. Nil
	// (MLLP, cron) means there is none: the bot runs as itself, whatever
	// its runAsUser, and is its own requester. A bot without runAsUser
	// runs as itself in any case. Its project must be Project.
	Caller *oauth.Identity
	// Entity lists what the run's AuditEvent names after the bot, as
	// Medplum's does: for a Subscription run, the Subscription and the
	// resource that triggered it.
	Entity []store.Reference
}

// RunMessage runs the bot m names on m's input, exactly as $execute runs it
// (the same runtimes, limits, fair shares, metrics and AuditEvent). With
// no Caller it runs as the bot itself: event.requester and the AuditEvent's
// agent are Bot/{id}. Its medplum calls reach the backend through the
// request-less route (Options.Backends) as the identity it runs as. The
// error is a *fhir.Error to answer instead of a result (bot not found,
// input refused, runs busy, stopped by a shutdown), or ctx's.
func (a *API) RunMessage(ctx context.Context, m Message) (*botrunner.Result, error) {
	call := runCall{
		id:          m.Caller,
		asBot:       m.Caller == nil,
		contentType: m.ContentType,
		body:        m.Body,
		header:      m.Header,
		traceID:     m.TraceID,
		entity:      m.Entity,
	}
	switch {
	case m.Caller == nil:
		call.id = &oauth.Identity{ProjectID: m.Project}
	case m.Caller.ProjectID != m.Project:
		return nil, fhir.NewError(http.StatusForbidden, "the caller is not a member of the bot's project")
	}
	if call.header == nil {
		call.header = http.Header{}
	}
	if call.header.Get("Content-Type") == "" {
		call.header = call.header.Clone()
		call.header.Set("Content-Type", m.ContentType)
	}
	if id, ok := strings.CutPrefix(m.Bot, "Bot/"); ok {
		call.bot.id = id
	} else {
		call.bot.identifiers = []string{m.Bot}
	}
	return a.runBot(ctx, call)
}

// RecordAudit stores an AuditEvent about a run that did not happen or a
// message that was not a run (a Subscription's webhook delivery, a bot
// its trigger chain stopped) the way a run's own is stored: queued for
// the background writer, many per transaction, kept for the audit
// retention within the project's bot records quota. A refused event is
// logged instead.
func (a *API) RecordAudit(ev *store.AuditEvent) {
	a.audit.record(ev)
}

package botapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/oauth"
)

// Message is a bot's input that arrived outside HTTP, such as an HL7 v2
// message over MLLP: there is no caller, so the bot runs as itself.
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
}

// RunMessage runs the bot m names on m's input, exactly as $execute runs it
// (the same runtimes, limits, fair shares, metrics and AuditEvent), as the
// bot itself: event.requester and the AuditEvent's agent are Bot/{id}.
// Such a run has no backend route of its own yet, so the bot's medplum
// calls are refused with a clear outcome. The error is a *fhir.Error to
// answer instead of a result (bot not found, input refused, runs busy,
// stopped by a shutdown), or ctx's.
func (a *API) RunMessage(ctx context.Context, m Message) (*botrunner.Result, error) {
	call := runCall{
		id:          &oauth.Identity{ProjectID: m.Project},
		asBot:       true,
		contentType: m.ContentType,
		body:        m.Body,
		header:      m.Header,
		traceID:     m.TraceID,
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

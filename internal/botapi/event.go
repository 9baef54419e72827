package botapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/store"
)

var traceparentSyntax = regexp.MustCompile(`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// traceIDOf follows Medplum: X-Trace-Id when it is a UUID, else a valid
// W3C traceparent, else a new UUID.
func traceIDOf(r *http.Request) string {
	if v := r.Header.Get("X-Trace-Id"); v != "" {
		if _, err := uuid.Parse(v); err == nil {
			return v
		}
	}
	if v := strings.TrimSpace(r.Header.Get("Traceparent")); traceparentSyntax.MatchString(v) {
		return v
	}
	return uuid.NewString()
}

// childTraceparent continues a W3C trace for a call a bot makes: the same
// version, trace id and flags as the run's traceparent, with a new
// parent id, so the backend's span is a child of the request's. ok is false
// when the run's trace id is not a traceparent (a UUID X-Trace-Id).
func childTraceparent(traceID string) (string, bool) {
	if !traceparentSyntax.MatchString(traceID) {
		return "", false
	}
	var span [8]byte
	_, _ = rand.Read(span[:]) // crypto/rand.Read never fails (Go 1.24+)
	return traceID[:36] + hex.EncodeToString(span[:]) + traceID[52:], true
}

// credentialHeaders never reach a bot (Medplum hands them over; a bot's
// code and logs are not the place for the caller's credentials).
var credentialHeaders = map[string]bool{
	"Authorization":       true,
	"Proxy-Authorization": true,
	"Cookie":              true,
}

// eventHeaders are the request headers a bot sees, lower-cased, repeated
// values joined as HTTP allows.
func eventHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for name, values := range h {
		if credentialHeaders[name] {
			continue
		}
		lower, ok := lowerHeaderNames[name]
		if !ok {
			lower = strings.ToLower(name)
		}
		out[lower] = strings.Join(values, ", ")
	}
	return out
}

// lowerHeaderNames holds the lower-case form of the header names every
// Subscription delivery (spec.Rule.Headers) and most requests carry, so
// that a run does not allocate them anew.
var lowerHeaderNames = func() map[string]string {
	m := map[string]string{}
	for _, name := range []string{
		"Content-Type", "Content-Length", "Accept", "Accept-Encoding", "User-Agent", "Traceparent", "X-Trace-Id",
		"X-Medplum-Subscription", "X-Medplum-Interaction", "X-Medplum-Deleted-Resource", "X-Signature",
	} {
		m[name] = strings.ToLower(name)
	}
	return m
}()

// secrets are the project's secrets overlaid with the bot's own, in
// Medplum's ProjectSetting shape.
func (a *API) secrets(ctx context.Context, bot *store.Bot) (map[string]botrunner.Secret, error) {
	out := map[string]botrunner.Secret{}
	project, err := store.Get[store.Project](ctx, a.o.Store, bot.Meta.Project)
	if err != nil {
		return nil, err
	}
	for _, settings := range [][]store.ProjectSetting{project.Secret, bot.Secret} {
		for _, s := range settings {
			sec := botrunner.Secret{Name: s.Name, ValueBoolean: s.ValueBoolean, ValueInteger: s.ValueInteger, ValueDecimal: s.ValueDecimal}
			if s.ValueString != "" {
				v := s.ValueString
				sec.ValueString = &v
			}
			out[s.Name] = sec
		}
	}
	return out, nil
}

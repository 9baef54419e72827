package fhir

import (
	"encoding/json"
	"net/http"
)

// Outcome is a FHIR OperationOutcome. Only the fields fhirgate emits are
// modelled; the JSON shape matches Medplum's (id chosen so that Medplum's
// client maps it to the same status we send).
type Outcome struct {
	ResourceType string  `json:"resourceType"`
	ID           string  `json:"id,omitempty"`
	Issue        []Issue `json:"issue"`
}

// Issue is one OperationOutcome.issue entry.
type Issue struct {
	Severity    string   `json:"severity"`
	Code        string   `json:"code"`
	Details     *Text    `json:"details,omitempty"`
	Diagnostics string   `json:"diagnostics,omitempty"`
	Expression  []string `json:"expression,omitempty"`
}

// Text is a CodeableConcept reduced to its text, which is all we set.
type Text struct {
	Text string `json:"text"`
}

// ContentType is the media type of FHIR JSON responses.
const ContentType = "application/fhir+json; charset=utf-8"

// issueCodes maps an HTTP status to the OperationOutcome id and issue code
// Medplum uses for it (packages/core/src/outcomes.ts), so a Medplum client
// derives the same status from the body as from the response line.
var issueCodes = map[int]struct{ id, code string }{
	http.StatusOK:                    {"ok", "informational"},
	http.StatusCreated:               {"created", "informational"},
	http.StatusAccepted:              {"accepted", "informational"},
	http.StatusBadRequest:            {"", "invalid"},
	http.StatusUnauthorized:          {"unauthorized", "login"},
	http.StatusForbidden:             {"forbidden", "forbidden"},
	http.StatusNotFound:              {"not-found", "not-found"},
	http.StatusMethodNotAllowed:      {"", "not-supported"},
	http.StatusConflict:              {"conflict", "conflict"},
	http.StatusGone:                  {"gone", "deleted"},
	http.StatusPreconditionFailed:    {"precondition-failed", "conflict"},
	http.StatusRequestEntityTooLarge: {"", "too-costly"},
	http.StatusUnsupportedMediaType:  {"unsupported-media-type", "not-supported"},
	http.StatusUnprocessableEntity:   {"business-rule", "business-rule"},
	http.StatusTooManyRequests:       {"too-many-requests", "throttled"},
	http.StatusServiceUnavailable:    {"", "transient"},
	http.StatusGatewayTimeout:        {"server-timeout", "timeout"},
}

// NewOutcome builds an OperationOutcome for an HTTP status with one issue
// whose details say text. Statuses below 400 give an informational issue.
// expression, when given, names the offending input (a field or parameter).
func NewOutcome(status int, text string, expression ...string) *Outcome {
	ic, ok := issueCodes[status]
	if !ok {
		ic.code = "processing"
		if status >= 500 {
			ic.code = "exception"
		}
	}
	severity := "error"
	if status < 400 {
		severity = "information"
	}
	return &Outcome{
		ResourceType: "OperationOutcome",
		ID:           ic.id,
		Issue: []Issue{{
			Severity:   severity,
			Code:       ic.code,
			Details:    &Text{Text: text},
			Expression: expression,
		}},
	}
}

// AllOK is the outcome Medplum answers for a successful operation with
// nothing else to say (and what a bot that returns undefined answers).
func AllOK() *Outcome { return NewOutcome(http.StatusOK, "All OK") }

// String joins the issues the way Medplum's operationOutcomeToString does:
// details, then "(diagnostics)", then "(expressions)", issues joined by "; ".
func (o *Outcome) String() string {
	var s string
	for i, is := range o.Issue {
		if i > 0 {
			s += "; "
		}
		if is.Details != nil {
			s += is.Details.Text
		}
		if is.Diagnostics != "" {
			s += " (" + is.Diagnostics + ")"
		}
		if len(is.Expression) > 0 {
			s += " ("
			for j, e := range is.Expression {
				if j > 0 {
					s += ", "
				}
				s += e
			}
			s += ")"
		}
	}
	return s
}

// WriteOutcome writes an OperationOutcome with the given status. It is the
// single place FHIR-facing error bodies are produced.
func WriteOutcome(w http.ResponseWriter, status int, text string, expression ...string) {
	WriteJSON(w, status, NewOutcome(status, text, expression...))
}

// WriteJSON writes v as FHIR JSON with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only our own types reach here; failing to marshal them is a bug,
		// but the client still deserves a well-formed answer.
		status = http.StatusInternalServerError
		body, _ = json.Marshal(NewOutcome(status, "internal error encoding the response"))
	}
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// MarshalOutcome is an OperationOutcome for status as FHIR JSON bytes.
func MarshalOutcome(status int, text string) []byte {
	body, _ := json.Marshal(NewOutcome(status, text)) // plain strings: cannot fail
	return body
}

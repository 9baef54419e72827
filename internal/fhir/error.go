package fhir

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Error is a failure a FHIR-facing answer reports: the HTTP status, and the
// OperationOutcome text safe to show the client. It is the one error type
// carrying a status in the packages that answer OperationOutcomes (bot
// input refused by botrunner, a deployment refused by deploy, a bot
// operation refused by botapi); WriteError answers it. (OAuth endpoints
// answer RFC 6749 JSON instead, with their own oauth.Error.)
type Error struct {
	// Status is the HTTP status to answer (4xx or 5xx).
	Status int
	// Message is the details text.
	Message string
	// Expression, when set, names the offending element (a field or
	// parameter): the expression.
	Expression string
	// RetryAfter, when positive, is sent as Retry-After, rounded up to
	// whole seconds.
	RetryAfter time.Duration
}

// Error implements error: the message.
func (e *Error) Error() string { return e.Message }

// HTTPStatus returns the status to answer.
func (e *Error) HTTPStatus() int { return e.Status }

// NewError returns an Error for status with message.
func NewError(status int, message string) *Error {
	return &Error{Status: status, Message: message}
}

// AsError returns the *Error err is or wraps, or nil.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// Outcome is e as an OperationOutcome.
func (e *Error) Outcome() *Outcome {
	if e.Expression != "" {
		return NewOutcome(e.Status, e.Message, e.Expression)
	}
	return NewOutcome(e.Status, e.Message)
}

// WriteError answers e: its status, its Retry-After, and its
// OperationOutcome.
func WriteError(w http.ResponseWriter, e *Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((e.RetryAfter+time.Second-1)/time.Second), 10))
	}
	WriteJSON(w, e.Status, e.Outcome())
}

package oauth

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// OAuth 2.0 error codes (RFC 6749 §5.2, RFC 8693 §2.2.2, RFC 6750 §3.1).
const (
	errInvalidRequest       = "invalid_request"
	errInvalidClient        = "invalid_client"
	errInvalidGrant         = "invalid_grant"
	errUnauthorizedClient   = "unauthorized_client"
	errUnsupportedGrantType = "unsupported_grant_type"
	errInvalidScope         = "invalid_scope"
	errUnavailable          = "temporarily_unavailable"
	errServerError          = "server_error"
	errInvalidToken         = "invalid_token"
)

// Error is an OAuth error response: the status, the RFC 6749 code and a
// description safe to show the client (it never contains a token).
type Error struct {
	Status      int
	Code        string
	Description string
	// RetryAfter, when positive, is sent as the Retry-After header.
	RetryAfter time.Duration
	// Reason is a short, fixed label for metrics and logs.
	Reason string
	// cause is an internal error behind a server_error, logged, never sent.
	cause error
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

func oauthErr(status int, code, reason, description string) *Error {
	return &Error{Status: status, Code: code, Description: description, Reason: reason}
}

// writeError sends e as RFC 6749 JSON.
func writeError(w http.ResponseWriter, e *Error) {
	h := w.Header()
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	if e.Status == http.StatusUnauthorized && e.Code == errInvalidClient {
		h.Set("WWW-Authenticate", `Basic realm="fhirgate"`)
	}
	writeJSON(w, e.Status, map[string]string{"error": e.Code, "error_description": e.Description})
}

// writeJSON sends an OAuth JSON response. Token responses and errors must
// never be cached (RFC 6749 §5.1).
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":"server_error","error_description":"encoding the response failed"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

package userinfo

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Kind classifies a failed lookup by what the caller should answer. Values
// double as metric labels and as the outcome passed to Options.Observe.
type Kind string

// Failure kinds.
const (
	// KindRejected: the provider answered 400, 401 or 403, or the token is
	// not a valid bearer token at all. The token is bad: invalid_grant.
	KindRejected Kind = "rejected"
	// KindRateLimited: the provider answered 429. Error.RetryAfter carries
	// its Retry-After when it sent one.
	KindRateLimited Kind = "rate_limited"
	// KindUnavailable: network or TLS failure, timeout, 5xx, another
	// unexpected status, an unreadable, empty or oversized body, a refused
	// redirect, or a bad URL. Not the token's fault: 503 + Retry-After.
	KindUnavailable Kind = "unavailable"
)

// outcomeOK is the outcome passed to Options.Observe for a successful call.
const outcomeOK = "ok"

// Error is the error of every failed [Client.Lookup].
type Error struct {
	Kind Kind
	// Status is the provider's HTTP status, 0 when there was no response.
	Status int
	// RetryAfter is the provider's Retry-After (capped at an hour), 0 when
	// it sent none.
	RetryAfter time.Duration
	Err        error
}

// Error implements error.
func (e *Error) Error() string {
	msg := "userinfo: " + string(e.Kind)
	if e.Status != 0 {
		msg += " (HTTP " + strconv.Itoa(e.Status) + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the Kind carried by err, or "" when err is not (and does not
// wrap) an [*Error].
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

// maxRetryAfter caps what a provider can make us tell our own clients.
const maxRetryAfter = time.Hour

// parseRetryAfter reads Retry-After as delay-seconds or an HTTP-date
// (RFC 9110 §10.2.3); 0 when absent or unparsable.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		d = time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now).Round(time.Second)
	}
	return max(0, min(d, maxRetryAfter))
}

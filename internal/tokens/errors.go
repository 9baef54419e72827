package tokens

import (
	"errors"
	"fmt"
)

// Reason says why a token was rejected. Values are stable, lowercase
// snake_case strings so they can be used directly as metric labels.
type Reason string

// Rejection reasons reported by [Service.Verify].
const (
	// ReasonMalformed: not a compact JWS, undecodable parts, bad JSON,
	// missing required claims or headers, or an oversized token.
	ReasonMalformed Reason = "malformed"
	// ReasonAlgorithm: "alg" is anything but ES256 ("none", HS256, RS256…).
	ReasonAlgorithm Reason = "algorithm"
	// ReasonUnknownKey: no "kid", or a kid this deployment does not (or no
	// longer) verifies with.
	ReasonUnknownKey Reason = "unknown_key"
	// ReasonSignature: the signature does not match the header and payload.
	ReasonSignature Reason = "signature"
	// ReasonExpired: "exp" is not in the future.
	ReasonExpired Reason = "expired"
	// ReasonNotYetValid: "nbf" or "iat" is further in the future than the
	// allowed clock skew.
	ReasonNotYetValid Reason = "not_yet_valid"
	// ReasonIssuer: "iss" is not this deployment's issuer.
	ReasonIssuer Reason = "issuer"
	// ReasonType: a valid token of another kind, e.g. a refresh or ID token
	// presented as an access token.
	ReasonType Reason = "type"
)

// Error is returned by [Service.Verify] for every rejected token. Its text
// never contains the token.
type Error struct {
	Reason Reason
	Err    error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err == nil {
		return "invalid token: " + string(e.Reason)
	}
	return "invalid token: " + string(e.Reason) + ": " + e.Err.Error()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the rejection reason carried by err, or "" when err is not
// (and does not wrap) an [*Error].
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func reject(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Err: fmt.Errorf(format, args...)}
}

// printable quotes a header value taken from an untrusted token for use in an
// error message, or hides it when it is long or unusual: error text ends up in
// logs, and a token's fields must not become a log-injection channel.
func printable(s string) string {
	if s == "" || len(s) > 64 {
		return "(hidden)"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '+' || c == ':'
		if !ok {
			return "(hidden)"
		}
	}
	return `"` + s + `"`
}

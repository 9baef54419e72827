// Package fhirstore answers the FHIR API's clients about store records: a stored resource as FHIR
// JSON with its version as an ETag, a store error as the status and OperationOutcome it means, and
// the reading of a resource's body and the absolute base URL that the services serving stored
// resources (adminapi, botapi, subscription) share. It sits between internal/store and those
// HTTP services, so that internal/fhir — which the bot engine uses — does not depend on the store.
package fhirstore

import (
	"errors"
	"net/http"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/store"
)

// ErrorStatus maps a store error to the status and OperationOutcome text a client should get,
// and the offending field when there is one. An unexpected error is a 500 whose text the caller
// decides to show or not.
func ErrorStatus(err error) (status int, text, field string) {
	var verr *store.ValidationError
	switch {
	case errors.As(err, &verr):
		return http.StatusBadRequest, verr.Error(), verr.Field
	case errors.Is(err, store.ErrUnknownType), errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, err.Error(), ""
	case errors.Is(err, store.ErrConflict):
		return http.StatusConflict, err.Error(), ""
	case errors.Is(err, store.ErrUnwritable):
		return http.StatusServiceUnavailable, "the store cannot take writes right now (its disk is full or read-only, or its database unreachable); try again later", ""
	default:
		return http.StatusInternalServerError, "store error", ""
	}
}

// UnwritableRetryAfter is the Retry-After, in seconds, of a 503 for a store
// that cannot take writes: a PostgreSQL restart or failover takes seconds,
// and a client retrying sooner only adds load.
const UnwritableRetryAfter = "5"

// WriteResource answers a stored resource as FHIR JSON, with its version as a weak ETag.
func WriteResource(w http.ResponseWriter, status int, res store.Resource) {
	if v := res.Base().Meta.VersionID; v != "" {
		w.Header().Set("ETag", `W/"`+v+`"`)
	}
	fhir.WriteJSON(w, status, res)
}

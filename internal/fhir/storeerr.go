package fhir

import (
	"errors"
	"net/http"

	"github.com/fhirgate/fhirgate/internal/store"
)

// StoreError maps a store error to the status and OperationOutcome text a
// client should get, and the offending field when there is one. An
// unexpected error is a 500 whose text the caller decides to show or not.
func StoreError(err error) (status int, text, field string) {
	var verr *store.ValidationError
	switch {
	case errors.As(err, &verr):
		return http.StatusBadRequest, verr.Error(), verr.Field
	case errors.Is(err, store.ErrUnknownType), errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, err.Error(), ""
	case errors.Is(err, store.ErrConflict):
		return http.StatusConflict, err.Error(), ""
	case errors.Is(err, store.ErrUnwritable):
		return http.StatusServiceUnavailable, "the store cannot take writes right now (disk full or read-only); reads still work", ""
	default:
		return http.StatusInternalServerError, "store error", ""
	}
}

// WriteResource answers a stored resource as FHIR JSON, with its version
// as a weak ETag.
func WriteResource(w http.ResponseWriter, status int, res store.Resource) {
	if v := res.Base().Meta.VersionID; v != "" {
		w.Header().Set("ETag", `W/"`+v+`"`)
	}
	WriteJSON(w, status, res)
}

package fhirstore

import (
	"fmt"
	"io"
	"mime"
	"net/http"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/fhir"
)

// WriteError answers a store error as its OperationOutcome (ErrorStatus),
// with a Retry-After on a store that cannot take writes. An unexpected
// error is logged with what, never shown: the FHIR API's clients are
// tenants, not the operator.
func WriteError(w http.ResponseWriter, err error, logger *zap.Logger, what string) {
	status, text, field := ErrorStatus(err)
	switch status {
	case http.StatusInternalServerError:
		logger.Error(what, zap.Error(err))
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", UnwritableRetryAfter)
	}
	var exprs []string
	if field != "" {
		exprs = []string{field}
	}
	fhir.WriteOutcome(w, status, text, exprs...)
}

// ReadJSONBody reads a resource's body of at most max bytes: a Content-Type
// other than JSON or FHIR JSON is a 415, a larger body a 413. On false the
// answer is written.
func ReadJSONBody(w http.ResponseWriter, r *http.Request, max int) ([]byte, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || (mt != "application/json" && mt != "application/fhir+json") {
			fhir.WriteOutcome(w, http.StatusUnsupportedMediaType, "send application/fhir+json or application/json")
			return nil, false
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(max)+1))
	if err != nil {
		fhir.WriteOutcome(w, http.StatusBadRequest, "reading the request body failed")
		return nil, false
	}
	if len(body) > max {
		fhir.WriteOutcome(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body exceeds %d bytes", max))
		return nil, false
	}
	return body, true
}

// BaseURL is the scheme and host the request reached the gateway at, for
// the absolute URLs (fullUrl, Content-Location) FHIR wants.
func BaseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

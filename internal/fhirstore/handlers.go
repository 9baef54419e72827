package fhirstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/store"
)

// WriteSearchset answers a search with found as a searchset Bundle. Each
// entry's fullUrl is absolute under base, the FHIR base path the request
// came in on, as FHIR requires of a resource a server holds.
func WriteSearchset[R store.Resource](w http.ResponseWriter, r *http.Request, base string, found []R) {
	bundle := fhir.NewSearchBundle(found)
	abs := BaseURL(r) + base + "/"
	for i := range bundle.Entry {
		b := found[i].Base()
		bundle.Entry[i].FullURL = abs + b.ResourceType + "/" + b.ID
	}
	fhir.WriteJSON(w, http.StatusOK, bundle)
}

// GetOwned reads the record of type T with id for a handler serving
// project: one that does not exist or belongs to another project is
// answered 404 naming it (so other tenants' ids cannot be probed), any
// other error as WriteError does, logged with what. On false the answer is
// written.
func GetOwned[T any, P interface {
	*T
	store.Resource
}](ctx context.Context, w http.ResponseWriter, st *store.Store, project, resourceType, id string, logger *zap.Logger, what string) (P, bool) {
	rec, err := store.GetInProject[T, P](ctx, st, project, id)
	if errors.Is(err, store.ErrNotFound) {
		fhir.WriteOutcome(w, http.StatusNotFound, fmt.Sprintf("%s/%s not found", resourceType, id))
		return nil, false
	}
	if err != nil {
		WriteError(w, err, logger, what)
		return nil, false
	}
	return rec, true
}

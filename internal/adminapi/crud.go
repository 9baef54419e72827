package adminapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/fhirstore"
	"github.com/fhirgate/fhirgate/internal/store"
)

func (h *Handler) create(w http.ResponseWriter, r *http.Request, typ string) {
	body, ok := h.readJSONBody(w, r)
	if !ok {
		return
	}
	res, err := decodeResource(typ, body)
	if err != nil {
		h.writeStoreError(w, r, err)
		return
	}
	if err := h.o.Store.Create(r.Context(), res, store.PutOptions{}); err != nil {
		h.writeStoreError(w, r, err)
		return
	}
	w.Header().Set("Location", Prefix+typ+"/"+res.Base().ID)
	fhirstore.WriteResource(w, http.StatusCreated, res)
}

func (h *Handler) put(w http.ResponseWriter, r *http.Request, typ, id string) {
	body, ok := h.readJSONBody(w, r)
	if !ok {
		return
	}
	res, err := decodeResource(typ, body)
	if err != nil {
		h.writeStoreError(w, r, err)
		return
	}
	if bodyID := res.Base().ID; bodyID != "" && bodyID != id {
		h.writeStoreError(w, r, &store.ValidationError{Field: "id", Message: fmt.Sprintf("is %q but the path says %q", bodyID, id)})
		return
	}
	res.Base().ID = id
	created, err := h.o.Store.Put(r.Context(), res, store.PutOptions{IfMatch: parseETag(r.Header.Get("If-Match"))})
	if err != nil {
		h.writeStoreError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", Prefix+typ+"/"+id)
	}
	fhirstore.WriteResource(w, status, res)
}

func (h *Handler) read(w http.ResponseWriter, r *http.Request, typ, id string) {
	res, err := store.NewResource(typ)
	if err != nil {
		h.writeStoreError(w, r, err)
		return
	}
	if err := h.o.Store.Read(r.Context(), typ, id, res); err != nil {
		h.writeStoreError(w, r, err)
		return
	}
	fhirstore.WriteResource(w, http.StatusOK, res)
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request, typ, id string) {
	if err := h.o.Store.Delete(r.Context(), typ, id); err != nil {
		h.writeStoreError(w, r, err)
		return
	}
	fhir.WriteJSON(w, http.StatusOK, fhir.NewOutcome(http.StatusOK, fmt.Sprintf("deleted %s/%s", typ, id)))
}

// listFilters maps query parameters to store filter fields. Any other
// parameter is an error rather than silently ignored: a typo must not turn
// a narrow query into "everything".
var listFilters = map[string]func(*store.Filter, string){
	"name":       func(f *store.Filter, v string) { f.Name = v },
	"email":      func(f *store.Filter, v string) { f.Email = v },
	"identifier": func(f *store.Filter, v string) { f.Identifier = v },
	"project":    func(f *store.Filter, v string) { f.Project = strings.TrimPrefix(v, "Project/") },
	"user":       func(f *store.Filter, v string) { f.User = strings.TrimPrefix(v, "User/") },
	"bot":        func(f *store.Filter, v string) { f.Bot = strings.TrimPrefix(v, "Bot/") },
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request, typ string) {
	var f store.Filter
	for key, values := range r.URL.Query() {
		set, ok := listFilters[key]
		if !ok {
			fhir.WriteOutcome(w, http.StatusBadRequest,
				fmt.Sprintf("unknown search parameter %q; supported: name, email, identifier, project, user, bot", key), key)
			return
		}
		if len(values) != 1 {
			fhir.WriteOutcome(w, http.StatusBadRequest, fmt.Sprintf("search parameter %q given %d times", key, len(values)), key)
			return
		}
		set(&f, values[0])
	}
	found, err := h.o.Store.List(r.Context(), typ, f)
	if err != nil {
		h.writeStoreError(w, r, err)
		return
	}
	fhir.WriteJSON(w, http.StatusOK, fhir.NewSearchBundle(found))
}

// parseETag accepts W/"v", "v" or v as an If-Match value.
func parseETag(v string) string {
	v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
	return strings.Trim(v, `"`)
}

// writeStoreError turns a store error into the matching OperationOutcome.
// The admin API is the operator's: an unexpected error is shown in full.
func (h *Handler) writeStoreError(w http.ResponseWriter, r *http.Request, err error) {
	status, text, field := fhirstore.ErrorStatus(err)
	switch status {
	case http.StatusInternalServerError:
		text = "store error: " + err.Error()
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", fhirstore.UnwritableRetryAfter)
	}
	var expr []string
	if field != "" {
		expr = []string{field}
	}
	h.fail(w, r, status, text, err, expr...)
}

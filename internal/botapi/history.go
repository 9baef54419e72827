package botapi

import (
	"fmt"
	"net/http"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/fhirstore"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// historyBundle is a FHIR history Bundle of one bot's versions.
type historyBundle struct {
	ResourceType string         `json:"resourceType"`
	Type         string         `json:"type"`
	Total        int            `json:"total"`
	Entry        []historyEntry `json:"entry,omitempty"`
}

type historyEntry struct {
	FullURL  string          `json:"fullUrl"`
	Resource *store.Bot      `json:"resource"`
	Response historyResponse `json:"response"`
}

type historyResponse struct {
	Status       string `json:"status"`
	Etag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
}

// serveBotHistory handles GET {base}/Bot/{id}/_history (the versions the
// store keeps, newest first: store.BotVersionsKept prior ones besides the
// current) and GET {base}/Bot/{id}/_history/{vid} (vread).
func (a *API) serveBotHistory(w http.ResponseWriter, r *http.Request, id *oauth.Identity, base, botID string, rest []string) {
	if _, ok := a.ownBot(w, r, id, botID); !ok || !requireAdmin(w, id) {
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		fhir.WriteOutcome(w, http.StatusMethodNotAllowed, "a bot's history is read with GET")
		return
	}
	versions, err := store.HistoryOf[store.Bot](r.Context(), a.o.Store, botID)
	if err != nil {
		a.writeStoreError(w, err)
		return
	}
	if len(rest) == 1 {
		for _, v := range versions {
			if v.Meta.VersionID == rest[0] {
				fhirstore.WriteResource(w, http.StatusOK, v)
				return
			}
		}
		fhir.WriteOutcome(w, http.StatusNotFound, fmt.Sprintf("Bot/%s has no version %q (fhirgate keeps the %d before the current one)",
			botID, rest[0], store.BotVersionsKept))
		return
	}
	for key := range r.URL.Query() {
		switch key {
		case "_count", "_since", "_at":
			fhir.WriteOutcome(w, http.StatusBadRequest,
				fmt.Sprintf("%s is not supported on a bot's _history; it lists every version kept", key), key)
			return
		}
	}
	abs := fhirstore.BaseURL(r) + base + "/Bot/" + botID
	b := historyBundle{ResourceType: "Bundle", Type: "history", Total: len(versions)}
	for _, v := range versions {
		b.Entry = append(b.Entry, historyEntry{
			FullURL:  abs,
			Resource: v,
			Response: historyResponse{Status: "200", Etag: `W/"` + v.Meta.VersionID + `"`, LastModified: v.Meta.LastUpdated},
		})
	}
	fhir.WriteJSON(w, http.StatusOK, b)
}

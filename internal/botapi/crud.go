package botapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/fhirgate/fhirgate/internal/deploy"
	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/fhirstore"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// maxResourceBody bounds Bot bodies and $deploy requests (bot source).
const maxResourceBody = 8 << 20

// Bots are managed through the FHIR API by project admins, exactly as
// Medplum's CLI and app do it. Every Bot request is answered here and never
// proxied: the backend knows nothing of bots. Non-admins get 403; another
// project's bot is a 404, as if it did not exist.

// serveBotType handles {base}/Bot: search (GET) and create (POST).
func (a *API) serveBotType(w http.ResponseWriter, r *http.Request, id *oauth.Identity, base string) {
	if !requireAdmin(w, id) {
		return
	}
	switch r.Method {
	case http.MethodGet:
		a.searchBots(w, r, id, base)
	case http.MethodPost:
		bot, ok := a.readBot(w, r)
		if !ok {
			return
		}
		a.createBot(w, r, id, bot, base)
	default:
		w.Header().Set("Allow", "GET, POST")
		fhir.WriteOutcome(w, http.StatusMethodNotAllowed, "use GET to search bots or POST to create one")
	}
}

// createBot stores a new bot in the caller's project and answers 201 with
// it, and a Location under base unless base is empty.
func (a *API) createBot(w http.ResponseWriter, r *http.Request, id *oauth.Identity, bot *store.Bot, base string) {
	bot.SourceCode, bot.ExecutableCode = nil, nil // set by $deploy only
	bot.Meta.Project = id.ProjectID
	if err := a.o.Store.Create(r.Context(), bot, store.PutOptions{}); err != nil {
		a.writeStoreError(w, err)
		return
	}
	if base != "" {
		w.Header().Set("Location", base+"/Bot/"+bot.ID)
	}
	fhirstore.WriteResource(w, http.StatusCreated, bot)
}

// serveBot handles {base}/Bot/{id}: read, replace, delete.
func (a *API) serveBot(w http.ResponseWriter, r *http.Request, id *oauth.Identity, botID string) {
	existing, ok := a.ownBot(w, r, id, botID)
	if !ok || !requireAdmin(w, id) {
		return
	}
	switch r.Method {
	case http.MethodGet:
		fhirstore.WriteResource(w, http.StatusOK, existing)
	case http.MethodPut:
		bot, ok := a.readBot(w, r)
		if !ok {
			return
		}
		if bot.ID != "" && bot.ID != botID {
			fhir.WriteOutcome(w, http.StatusBadRequest, fmt.Sprintf("the body's id %q differs from the URL's %q", bot.ID, botID), "id")
			return
		}
		bot.ID = botID
		bot.Meta.Project = id.ProjectID
		// The code attachments point at Binaries only $deploy writes.
		bot.SourceCode, bot.ExecutableCode = existing.SourceCode, existing.ExecutableCode
		ifMatch := strings.Trim(strings.TrimPrefix(r.Header.Get("If-Match"), "W/"), `"`)
		if _, err := a.o.Store.Put(r.Context(), bot, store.PutOptions{IfMatch: ifMatch}); err != nil {
			a.writeStoreError(w, err)
			return
		}
		fhirstore.WriteResource(w, http.StatusOK, bot)
	case http.MethodDelete:
		if err := a.o.Store.Delete(r.Context(), "Bot", botID); err != nil {
			a.writeStoreError(w, err)
			return
		}
		fhir.WriteJSON(w, http.StatusOK, fhir.AllOK())
	default:
		w.Header().Set("Allow", "GET, PUT, DELETE")
		fhir.WriteOutcome(w, http.StatusMethodNotAllowed, "use GET, PUT or DELETE on a bot")
	}
}

// serveDeploy handles POST {base}/Bot/{id}/$deploy with Medplum's body
// {code, filename}.
func (a *API) serveDeploy(w http.ResponseWriter, r *http.Request, id *oauth.Identity, botID string) {
	if _, ok := a.ownBot(w, r, id, botID); !ok || !requireAdmin(w, id) {
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		fhir.WriteOutcome(w, http.StatusMethodNotAllowed, "$deploy accepts POST only")
		return
	}
	body, ok := fhirstore.ReadJSONBody(w, r, maxResourceBody)
	if !ok {
		return
	}
	var req struct {
		Code     string `json:"code"`
		Filename string `json:"filename"`
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			fhir.WriteOutcome(w, http.StatusBadRequest, "the body must be {\"code\": ..., \"filename\": ...}")
			return
		}
	}
	if req.Code == "" {
		// Medplum's app re-deploys without a body; our stored code is
		// already compiled, so re-deploying means compiling the source again.
		bot, _ := store.Get[store.Bot](r.Context(), a.o.Store, botID)
		code, filename, err := deploy.Source(r.Context(), a.o.Store, bot)
		if err != nil {
			fhir.WriteOutcome(w, http.StatusBadRequest, "Bot missing executable code", "code")
			return
		}
		req.Code, req.Filename = code, filename
	}
	if req.Filename == "" {
		req.Filename = "index.js"
	}
	if _, err := deploy.Deploy(r.Context(), a.o.Store, a.o.Compiler, botID, req.Filename, req.Code); err != nil {
		if ferr := fhir.AsError(err); ferr != nil {
			fhir.WriteError(w, ferr)
			return
		}
		a.writeStoreError(w, err)
		return
	}
	fhir.WriteJSON(w, http.StatusOK, fhir.AllOK())
}

func (a *API) searchBots(w http.ResponseWriter, r *http.Request, id *oauth.Identity, base string) {
	f := store.Filter{Project: id.ProjectID}
	for key, values := range r.URL.Query() {
		if len(values) != 1 {
			fhir.WriteOutcome(w, http.StatusBadRequest, fmt.Sprintf("search parameter %q given more than once", key), key)
			return
		}
		switch key {
		case "identifier":
			f.Identifier = values[0]
		case "name":
			f.Name = values[0]
		case "_count", "_sort", "_total", "_summary":
			// Accepted and ignored: results are few and ordered by id.
		default:
			fhir.WriteOutcome(w, http.StatusBadRequest,
				fmt.Sprintf("unsupported Bot search parameter %q; supported: identifier, name", key), key)
			return
		}
	}
	bots, err := store.Search[store.Bot](r.Context(), a.o.Store, f)
	if err != nil {
		a.writeStoreError(w, err)
		return
	}
	fhirstore.WriteSearchset(w, r, base, bots)
}

// ownBot loads a bot of the caller's project, answering 404 otherwise.
func (a *API) ownBot(w http.ResponseWriter, r *http.Request, id *oauth.Identity, botID string) (*store.Bot, bool) {
	return fhirstore.GetOwned[store.Bot](r.Context(), w, a.o.Store, id.ProjectID, "Bot", botID, a.o.Logger, botStoreOperation)
}

func requireAdmin(w http.ResponseWriter, id *oauth.Identity) bool {
	if !id.Admin {
		fhir.WriteOutcome(w, http.StatusForbidden, "managing bots requires a project admin")
	}
	return id.Admin
}

func (a *API) readBot(w http.ResponseWriter, r *http.Request) (*store.Bot, bool) {
	body, ok := fhirstore.ReadJSONBody(w, r, maxResourceBody)
	if !ok {
		return nil, false
	}
	bot, err := store.DecodeBot(body)
	if err != nil {
		var verr *store.ValidationError
		if errors.As(err, &verr) {
			fhir.WriteOutcome(w, http.StatusBadRequest, "the body is not a valid Bot: "+verr.Error(), verr.Field)
			return nil, false
		}
		fhir.WriteOutcome(w, http.StatusBadRequest, "the body is not a valid Bot: "+err.Error())
		return nil, false
	}
	if bot.ResourceType != "" && bot.ResourceType != "Bot" {
		fhir.WriteOutcome(w, http.StatusBadRequest, fmt.Sprintf("resourceType is %q, expected Bot", bot.ResourceType), "resourceType")
		return nil, false
	}
	return bot, true
}

// writeStoreError maps a store error to an OperationOutcome; unexpected
// errors are logged, not shown.
// botStoreOperation names a failed store call in the log.
const botStoreOperation = "bot store operation"

func (a *API) writeStoreError(w http.ResponseWriter, err error) {
	fhirstore.WriteError(w, err, a.o.Logger, botStoreOperation)
}

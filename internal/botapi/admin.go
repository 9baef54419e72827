package botapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/fhirstore"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// adminBotPath is Medplum's bot-creation route, which `medplum bot create`
// posts to before it saves and deploys the code. The id is matched
// strictly (Medplum's id alphabet), so no dotted or encoded path reaches
// it.
var adminBotPath = regexp.MustCompile(`^/admin/projects/([A-Za-z0-9\-.]{1,64})/bot$`)

// SiteHandler returns the handler of a Medplum route outside the FHIR base
// that fhirgate answers itself, given the request's escaped path, or nil.
// Today that is POST /admin/projects/{projectId}/bot.
func (a *API) SiteHandler(escapedPath string) gateway.Operation {
	m := adminBotPath.FindStringSubmatch(escapedPath)
	if m == nil || m[1] == "." || m[1] == ".." {
		return nil
	}
	project := m[1]
	return func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, _ *gateway.Backend) {
		a.serveAdminCreateBot(w, r, id, project)
	}
}

// serveAdminCreateBot creates a Bot as Medplum's admin route does: the
// body is {name, description?, runtimeVersion?}, the answer 201 with the
// Bot. The caller must be an admin of that project; another project is a
// 404, as every other project's bot is.
func (a *API) serveAdminCreateBot(w http.ResponseWriter, r *http.Request, id *oauth.Identity, project string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		fhir.WriteOutcome(w, http.StatusMethodNotAllowed, "use POST to create a bot")
		return
	}
	if project != id.ProjectID {
		fhir.WriteOutcome(w, http.StatusNotFound, fmt.Sprintf("Project/%s not found", project))
		return
	}
	if !requireAdmin(w, id) {
		return
	}
	body, ok := fhirstore.ReadJSONBody(w, r, maxResourceBody)
	if !ok {
		return
	}
	var req struct {
		Name           string          `json:"name"`
		Description    string          `json:"description"`
		RuntimeVersion string          `json:"runtimeVersion"`
		AccessPolicy   json.RawMessage `json:"accessPolicy"`
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fhir.WriteOutcome(w, http.StatusBadRequest, "the body must be {\"name\": ..., \"description\": ..., \"runtimeVersion\": ...}: "+err.Error())
		return
	}
	if strings.TrimSpace(req.Name) == "" {
		fhir.WriteOutcome(w, http.StatusBadRequest, "Bot name is required", "name")
		return
	}
	if len(req.AccessPolicy) > 0 && string(req.AccessPolicy) != "null" {
		// Failing loudly beats creating a bot with more access than asked.
		fhir.WriteOutcome(w, http.StatusBadRequest, "fhirgate has no AccessPolicy: create the bot without accessPolicy", "accessPolicy")
		return
	}
	// Medplum's route answers without a Location; this one does the same,
	// as it does not know the FHIR base the Bot is read under.
	a.createBot(w, r, id, &store.Bot{Name: req.Name, Description: req.Description, RuntimeVersion: req.RuntimeVersion}, "")
}

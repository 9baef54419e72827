package botapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
)

// TestAdminCreateBotRoute is Medplum's POST /admin/projects/{id}/bot, which
// `medplum bot create` calls: answered by the gateway for the project's
// admins, never proxied.
func TestAdminCreateBotRoute(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	path := "/admin/projects/" + f.project.ID + "/bot"
	tests := []struct {
		name, token, method, path, body string
		status                          int
	}{
		{name: "admin creates", token: f.adminToken, method: "POST", path: path, body: `{"name":"lab-feed","description":"","runtimeVersion":"vmcontext"}`, status: 201},
		{name: "member refused", token: f.memberToken, method: "POST", path: path, body: `{"name":"x"}`, status: 403},
		{name: "another project", token: f.adminToken, method: "POST", path: "/admin/projects/other-project/bot", body: `{"name":"x"}`, status: 404},
		{name: "no token", method: "POST", path: path, body: `{"name":"x"}`, status: 401},
		{name: "GET", token: f.adminToken, method: "GET", path: path, status: 405},
		{name: "no name", token: f.adminToken, method: "POST", path: path, body: `{"description":"d"}`, status: 400},
		{name: "accessPolicy", token: f.adminToken, method: "POST", path: path, body: `{"name":"x","accessPolicy":{"reference":"AccessPolicy/1"}}`, status: 400},
		{name: "unknown field", token: f.adminToken, method: "POST", path: path, body: `{"name":"x","sourceCode":{"url":"Binary/1"}}`, status: 400},
		{name: "bad runtime", token: f.adminToken, method: "POST", path: path, body: `{"name":"x","runtimeVersion":"nodejs"}`, status: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.backendRequests())
			res := f.serve(t, tt.token, tt.method, tt.path, tt.body)
			if res.status != tt.status {
				t.Fatalf("status %d, want %d: %s", res.status, tt.status, res.body)
			}
			if n := len(f.backendRequests()); n != before {
				t.Fatalf("the request reached the backend")
			}
			if tt.status != 201 {
				return
			}
			b := res.json(t)
			id, _ := b["id"].(string)
			bot, err := store.Get[store.Bot](context.Background(), f.st, id)
			if err != nil {
				t.Fatalf("created bot %q: %v (%s)", id, err, res.body)
			}
			if b["resourceType"] != "Bot" || bot.Name != "lab-feed" || bot.RuntimeVersion != "vmcontext" || bot.Meta.Project != f.project.ID {
				t.Fatalf("bot %+v, body %s", bot, res.body)
			}
		})
	}

	// A longer or dotted path is not the route: it goes on as any path
	// outside the FHIR base does.
	for _, p := range []string{path + "/x", "/admin/projects/../bot", "/admin/projects/" + f.project.ID + "/bots"} {
		if res := f.serve(t, f.adminToken, http.MethodPost, p, `{"name":"x"}`); res.status == http.StatusCreated {
			t.Fatalf("%s created a bot: %s", p, res.body)
		}
	}
}

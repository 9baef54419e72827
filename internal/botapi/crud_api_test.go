package botapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
)

// TestBotLifecycleThroughTheGateway: a project admin creates, reads,
// searches, replaces, deploys, runs and deletes a bot over HTTP through the
// gateway, and each step is checked in the answer and in the store.
func TestBotLifecycleThroughTheGateway(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	ctx := context.Background()
	tok := f.adminToken

	// Create: the project is the caller's, whatever the body says; code
	// attachments are $deploy's alone.
	created := f.serve(t, tok, http.MethodPost, "/fhir/R4/Bot",
		`{"resourceType":"Bot","name":"triage","identifier":[{"system":"https://ex.org/bots","value":"triage"}],`+
			`"meta":{"project":"someone-else"},"sourceCode":{"contentType":"text/javascript","url":"Binary/forged"}}`)
	if created.status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	body := created.json(t)
	botID, _ := body["id"].(string)
	if botID == "" || created.header.Get("Location") != "/fhir/R4/Bot/"+botID || body["sourceCode"] != nil {
		t.Fatalf("create: Location %q, body %s", created.header.Get("Location"), created.body)
	}
	stored, err := store.Get[store.Bot](ctx, f.st, botID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Name != "triage" || stored.Meta.Project != f.project.ID || stored.SourceCode != nil {
		t.Fatalf("stored bot: name %q project %q sourceCode %v", stored.Name, stored.Meta.Project, stored.SourceCode)
	}

	// Read, with the version as ETag.
	read := f.serve(t, tok, http.MethodGet, "/fhir/R4/Bot/"+botID, "")
	if read.status != http.StatusOK || read.json(t)["name"] != "triage" || read.header.Get("ETag") != `W/"`+stored.Meta.VersionID+`"` {
		t.Fatalf("read: %d ETag %q %s", read.status, read.header.Get("ETag"), read.body)
	}

	// Search by name and identifier; a miss is an empty bundle.
	for query, want := range map[string]int{
		"name=triage": 1, "identifier=https://ex.org/bots|triage": 1, "name=nobody": 0, "_count=10&_sort=name": 1,
	} {
		s := f.serve(t, tok, http.MethodGet, "/fhir/R4/Bot?"+query, "")
		if s.status != http.StatusOK {
			t.Fatalf("search %s: %d %s", query, s.status, s.body)
		}
		b := s.json(t)
		entries, _ := b["entry"].([]any)
		if b["resourceType"] != "Bundle" || len(entries) != want {
			t.Errorf("search %s: %d entries, want %d: %.300s", query, len(entries), want, s.body)
			continue
		}
		if want == 1 {
			if url := entries[0].(map[string]any)["fullUrl"]; url != f.srv.URL+"/fhir/R4/Bot/"+botID {
				t.Errorf("search %s: fullUrl %v", query, url)
			}
		}
	}

	// Deploy code, then run it.
	dep := f.serve(t, tok, http.MethodPost, "/fhir/R4/Bot/"+botID+"/$deploy",
		`{"code":"exports.handler = async (medplum, event) => ({ got: event.input.n * 2 });","filename":"triage.js"}`)
	if dep.status != http.StatusOK {
		t.Fatalf("deploy: %d %s", dep.status, dep.body)
	}
	run := f.serve(t, tok, http.MethodPost, "/fhir/R4/Bot/"+botID+"/$execute", `{"n":21}`)
	if run.status != http.StatusOK || strings.TrimSpace(run.body) != `{"got":42}` {
		t.Fatalf("execute: %d %s", run.status, run.body)
	}

	// Replace: a stale If-Match is a conflict and changes nothing; the
	// current one succeeds and keeps the deployed code.
	stale := f.serve(t, tok, http.MethodPut, "/fhir/R4/Bot/"+botID, `{"resourceType":"Bot","name":"renamed"}`, "If-Match", `W/"not-the-version"`)
	if stale.status != http.StatusConflict {
		t.Errorf("replace with a stale If-Match: %d %s", stale.status, stale.body)
	}
	deployed, err := store.Get[store.Bot](ctx, f.st, botID)
	if err != nil {
		t.Fatal(err)
	}
	if deployed.Name != "triage" || deployed.ExecutableCode == nil {
		t.Fatalf("after the refused replace: name %q, executable %v", deployed.Name, deployed.ExecutableCode)
	}
	put := f.serve(t, tok, http.MethodPut, "/fhir/R4/Bot/"+botID, `{"resourceType":"Bot","id":"`+botID+`","name":"renamed","timeout":30}`,
		"If-Match", `W/"`+deployed.Meta.VersionID+`"`)
	if put.status != http.StatusOK || put.json(t)["name"] != "renamed" {
		t.Fatalf("replace: %d %s", put.status, put.body)
	}
	replaced, err := store.Get[store.Bot](ctx, f.st, botID)
	if err != nil {
		t.Fatal(err)
	}
	if replaced.Name != "renamed" || replaced.Timeout != 30 || replaced.Meta.Project != f.project.ID ||
		replaced.ExecutableCode == nil || replaced.ExecutableCode.URL != deployed.ExecutableCode.URL {
		t.Errorf("replaced bot: name %q timeout %d project %q executable %v", replaced.Name, replaced.Timeout, replaced.Meta.Project, replaced.ExecutableCode)
	}
	if run := f.serve(t, tok, http.MethodPost, "/fhir/R4/Bot/"+botID+"/$execute", `{"n":1}`); run.status != http.StatusOK || strings.TrimSpace(run.body) != `{"got":2}` {
		t.Errorf("execute after the replace: %d %s", run.status, run.body)
	}

	// Re-deploy without a body compiles the stored source again.
	if redep := f.serve(t, tok, http.MethodPost, "/fhir/R4/Bot/"+botID+"/$deploy", ""); redep.status != http.StatusOK {
		t.Errorf("re-deploy without a body: %d %s", redep.status, redep.body)
	}
	if run := f.serve(t, tok, http.MethodPost, "/fhir/R4/Bot/"+botID+"/$execute", `{"n":5}`); run.status != http.StatusOK || strings.TrimSpace(run.body) != `{"got":10}` {
		t.Errorf("execute after the re-deploy: %d %s", run.status, run.body)
	}

	// Delete: gone from the store, 404 afterwards.
	del := f.serve(t, tok, http.MethodDelete, "/fhir/R4/Bot/"+botID, "")
	if del.status != http.StatusOK || del.json(t)["resourceType"] != "OperationOutcome" {
		t.Fatalf("delete: %d %s", del.status, del.body)
	}
	if _, err := store.Get[store.Bot](ctx, f.st, botID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the deleted bot is still stored: %v", err)
	}
	if r := f.serve(t, tok, http.MethodGet, "/fhir/R4/Bot/"+botID, ""); r.status != http.StatusNotFound {
		t.Errorf("read after delete: %d %s", r.status, r.body)
	}
	if r := f.serve(t, tok, http.MethodPost, "/fhir/R4/Bot/"+botID+"/$execute", `{}`); r.status != http.StatusNotFound {
		t.Errorf("execute after delete: %d %s", r.status, r.body)
	}
}

// TestBotManagementRefusals: what a bot request may not do, and the
// status and message each refusal answers, with nothing stored.
func TestBotManagementRefusals(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	bot := f.deployBot(t, &store.Bot{Name: "mine"}, `exports.handler = async () => 'ok';`)
	undeployed := &store.Bot{Name: "empty"}
	undeployed.Meta.Project = f.project.ID
	f.mustCreate(t, undeployed)
	other := &store.Project{Name: "other"}
	f.mustCreate(t, other)
	theirs := &store.Bot{Name: "theirs"}
	theirs.Meta.Project = other.ID
	f.mustCreate(t, theirs)
	outsider := &oauth.Identity{ProjectID: other.ID, Admin: true}

	big := `{"name":"` + strings.Repeat("x", maxResourceBody) + `"}`
	tests := []struct {
		name                string
		token               string // "" with id: a direct call
		id                  *oauth.Identity
		method, path, body  string
		header              []string
		status              int
		text, allow, exprIn string
	}{
		{name: "member searches", token: f.memberToken, method: "GET", path: "/fhir/R4/Bot", status: 403, text: "requires a project admin"},
		{name: "member creates", token: f.memberToken, method: "POST", path: "/fhir/R4/Bot", body: `{"name":"x"}`, status: 403, text: "requires a project admin"},
		{name: "member reads", token: f.memberToken, method: "GET", path: "/fhir/R4/Bot/" + bot.ID, status: 403, text: "requires a project admin"},
		{name: "member deploys", token: f.memberToken, method: "POST", path: "/fhir/R4/Bot/" + bot.ID + "/$deploy", body: `{"code":"x"}`, status: 403},
		{name: "another project's bot", id: f.admin, method: "GET", path: "/fhir/R4/Bot/" + theirs.ID, status: 404, text: "Bot/" + theirs.ID + " not found"},
		{name: "my bot from another project", id: outsider, method: "DELETE", path: "/fhir/R4/Bot/" + bot.ID, status: 404},
		{name: "deploy another project's bot", id: f.admin, method: "POST", path: "/fhir/R4/Bot/" + theirs.ID + "/$deploy", body: `{"code":"x"}`, status: 404},
		{name: "unknown field", token: f.adminToken, method: "POST", path: "/fhir/R4/Bot", body: `{"name":"x","colour":"red"}`, status: 400, text: "not a valid Bot"},
		{name: "wrong resourceType", token: f.adminToken, method: "POST", path: "/fhir/R4/Bot", body: `{"resourceType":"Patient","name":"x"}`, status: 400, text: `resourceType is "Patient"`},
		{name: "invalid field value", token: f.adminToken, method: "POST", path: "/fhir/R4/Bot", body: `{"name":"x","timeout":901}`, status: 400, text: "timeout", exprIn: "timeout"},
		{name: "not JSON", token: f.adminToken, method: "POST", path: "/fhir/R4/Bot", body: `name=x`, header: []string{"Content-Type", "text/plain"}, status: 415},
		{name: "too large", token: f.adminToken, method: "POST", path: "/fhir/R4/Bot", body: big, status: 413, text: "exceeds"},
		{name: "id differs from URL", token: f.adminToken, method: "PUT", path: "/fhir/R4/Bot/" + bot.ID, body: `{"id":"other","name":"x"}`, status: 400, text: "differs from the URL", exprIn: "id"},
		{name: "patch the type", token: f.adminToken, method: "PATCH", path: "/fhir/R4/Bot", body: `{}`, status: 405, allow: "GET, POST"},
		{name: "patch a bot", token: f.adminToken, method: "PATCH", path: "/fhir/R4/Bot/" + bot.ID, body: `{}`, status: 405, allow: "GET, PUT, DELETE"},
		{name: "GET $deploy", token: f.adminToken, method: "GET", path: "/fhir/R4/Bot/" + bot.ID + "/$deploy", status: 405, allow: "POST"},
		{name: "deploy body not an object", token: f.adminToken, method: "POST", path: "/fhir/R4/Bot/" + bot.ID + "/$deploy", body: `["code"]`, status: 400, text: `{"code": ..., "filename": ...}`},
		{name: "deploy syntax error", token: f.adminToken, method: "POST", path: "/fhir/R4/Bot/" + bot.ID + "/$deploy", body: `{"code":"exports.handler = async () => {"}`, status: 400, text: "compiling bot"},
		{name: "re-deploy with no source", token: f.adminToken, method: "POST", path: "/fhir/R4/Bot/" + undeployed.ID + "/$deploy", status: 400, text: "Bot missing executable code"},
		{name: "execute with no code", token: f.adminToken, method: "POST", path: "/fhir/R4/Bot/" + undeployed.ID + "/$execute", body: `{}`, status: 400, text: "has no deployed code"},
		{name: "search parameter twice", token: f.adminToken, method: "GET", path: "/fhir/R4/Bot?name=a&name=b", status: 400, text: "more than once", exprIn: "name"},
		{name: "unsupported search parameter", token: f.adminToken, method: "GET", path: "/fhir/R4/Bot?description=x", status: 400, text: "unsupported Bot search parameter", exprIn: "description"},
		{name: "unknown bot operation", token: f.adminToken, method: "POST", path: "/fhir/R4/Bot/" + bot.ID + "/$validate", body: `{}`, status: 404, text: "fhirgate supports Bot read"},
		{name: "execute with DELETE", token: f.adminToken, method: "DELETE", path: "/fhir/R4/Bot/" + bot.ID + "/$execute", status: 405, allow: "GET, POST"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r response
			if tc.token != "" {
				r = f.serve(t, tc.token, tc.method, tc.path, tc.body, tc.header...)
			} else {
				r = f.call(t, tc.id, tc.method, tc.path, tc.body, tc.header...)
			}
			if r.status != tc.status {
				t.Fatalf("%d, want %d: %.300s", r.status, tc.status, r.body)
			}
			if got := outcomeText(t, r); !strings.Contains(got, tc.text) {
				t.Errorf("outcome %q does not say %q", got, tc.text)
			}
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow %q, want %q", got, tc.allow)
			}
			if tc.exprIn != "" && !strings.Contains(r.body, `"expression":["`+tc.exprIn+`"]`) {
				t.Errorf("outcome does not point at %q: %s", tc.exprIn, r.body)
			}
		})
	}
	bots, err := store.Search[store.Bot](context.Background(), f.st, store.Filter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bots {
		if b.ID != bot.ID && b.ID != undeployed.ID && b.ID != theirs.ID {
			t.Errorf("a refused request stored Bot %q", b.Name)
		}
	}
	for _, b := range []*store.Bot{bot, theirs} {
		if _, err := store.Get[store.Bot](context.Background(), f.st, b.ID); err != nil {
			t.Errorf("Bot %q after the refusals: %v", b.Name, err)
		}
	}
}

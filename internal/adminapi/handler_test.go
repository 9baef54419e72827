package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// testAPI is an admin API over a real Badger store in a temp dir.
type testAPI struct {
	t       *testing.T
	h       *Handler
	st      *store.Store
	db      *badgerkv.KV
	deploys []string
}

// deployFailure is what deploy.Deploy returns for a syntax error.
var deployFailure = &fhir.Error{Status: http.StatusBadRequest, Message: "index.ts:2:7: Expected ';' but found 'x'"}

func newTestAPI(t *testing.T) *testAPI {
	t.Helper()
	db := storetest.OpenKV(t)
	api := &testAPI{t: t, st: store.New(db, store.Options{}), db: db}
	api.h = New(Options{
		Store: api.st,
		Deploy: func(ctx context.Context, botID, filename, code string) (*store.Bot, error) {
			api.deploys = append(api.deploys, botID+":"+filename)
			if strings.Contains(code, "syntax error") {
				return nil, deployFailure
			}
			return store.Get[store.Bot](ctx, api.st, botID)
		},
		Backup:  db.Backup,
		Restore: db.Restore,
		MaxBody: 4096,
	})
	return api
}

// do sends a request and returns the status and decoded JSON body.
func (a *testAPI) do(method, path, contentType, body string, headers ...string) (int, map[string]any, http.Header) {
	a.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	var out map[string]any
	if rec.Body.Len() > 0 && strings.Contains(rec.Header().Get("Content-Type"), "json") {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			a.t.Fatalf("%s %s: response is not JSON: %s", method, path, rec.Body)
		}
	}
	return rec.Code, out, rec.Header()
}

func (a *testAPI) mustCreate(typ, body string) string {
	a.t.Helper()
	status, out, _ := a.do("POST", "/fhirgate/"+typ, "application/json", body)
	if status != http.StatusCreated {
		a.t.Fatalf("create %s: status %d: %v", typ, status, out)
	}
	return out["id"].(string)
}

func outcomeText(out map[string]any) string {
	issues, _ := out["issue"].([]any)
	if len(issues) == 0 {
		return ""
	}
	details, _ := issues[0].(map[string]any)["details"].(map[string]any)
	text, _ := details["text"].(string)
	return text
}

func TestAdminAPIVerbs(t *testing.T) {
	a := newTestAPI(t)

	status, out, h := a.do("PUT", "/fhirgate/Project/demo", "application/json", `{"resourceType":"Project","name":"Demo"}`)
	if status != http.StatusCreated || out["id"] != "demo" || h.Get("Location") != "/fhirgate/Project/demo" {
		t.Fatalf("PUT new project: %d %v %v", status, out, h)
	}
	v1 := out["meta"].(map[string]any)["versionId"].(string)
	if h.Get("ETag") != `W/"`+v1+`"` {
		t.Fatalf("ETag %q, versionId %q", h.Get("ETag"), v1)
	}

	status, out, _ = a.do("PUT", "/fhirgate/Project/demo", "application/fhir+json", `{"name":"Demo clinic"}`)
	if status != http.StatusOK || out["name"] != "Demo clinic" || out["meta"].(map[string]any)["versionId"] == v1 {
		t.Fatalf("PUT replace: %d %v", status, out)
	}

	userID := a.mustCreate("User", `{"email":"Alice@Example.com"}`)
	status, out, _ = a.do("GET", "/fhirgate/User/"+userID, "", "")
	if status != http.StatusOK || out["email"] == nil {
		t.Fatalf("GET user: %d %v", status, out)
	}

	status, out, _ = a.do("GET", "/fhirgate/User?email=alice@example.com", "", "")
	entries, _ := out["entry"].([]any)
	if status != http.StatusOK || out["resourceType"] != "Bundle" || len(entries) != 1 {
		t.Fatalf("search user by email: %d %v", status, out)
	}

	botID := a.mustCreate("Bot", `{"name":"echo","meta":{"project":"demo"},"identifier":[{"system":"https://example.com/bots","value":"echo"}]}`)
	status, out, _ = a.do("GET", "/fhirgate/Bot?identifier=https://example.com/bots|echo", "", "")
	if entries, _ := out["entry"].([]any); status != http.StatusOK || len(entries) != 1 {
		t.Fatalf("search bot by identifier: %d %v", status, out)
	}

	status, out, _ = a.do("POST", "/fhirgate/Bot/"+botID+"/$deploy", "application/json", `{"code":"exports.handler = async () => 1","filename":"echo.js"}`)
	if status != http.StatusOK || out["resourceType"] != "Bot" {
		t.Fatalf("deploy: %d %v", status, out)
	}
	if len(a.deploys) != 1 || a.deploys[0] != botID+":echo.js" {
		t.Fatalf("deploy calls %v", a.deploys)
	}

	status, out, _ = a.do("DELETE", "/fhirgate/Bot/"+botID, "", "")
	if status != http.StatusOK || out["resourceType"] != "OperationOutcome" {
		t.Fatalf("DELETE: %d %v", status, out)
	}
	if status, _, _ = a.do("GET", "/fhirgate/Bot/"+botID, "", ""); status != http.StatusNotFound {
		t.Fatalf("GET after DELETE: %d", status)
	}
}

func TestAdminAPIErrors(t *testing.T) {
	a := newTestAPI(t)
	a.do("PUT", "/fhirgate/Project/p1", "application/json", `{"name":"P1"}`)
	a.mustCreate("User", `{"email":"bob@example.com"}`)
	botID := a.mustCreate("Bot", `{"name":"b","meta":{"project":"p1"},"identifier":[{"system":"s","value":"v"}]}`)
	_, cur, _ := a.do("GET", "/fhirgate/Project/p1", "", "")
	version := cur["meta"].(map[string]any)["versionId"].(string)

	tests := []struct {
		name, method, path, contentType, body string
		headers                               []string
		status                                int
		textContains                          string
	}{
		{name: "unknown type", method: "GET", path: "/fhirgate/Patient/1", status: 404, textContains: "unknown resource type"},
		{name: "unknown id", method: "GET", path: "/fhirgate/Project/nope", status: 404},
		{name: "unknown route", method: "GET", path: "/fhirgate/Project/p1/extra/more", status: 404},
		{name: "delete unknown", method: "DELETE", path: "/fhirgate/User/nope", status: 404},
		{name: "wrong method on type", method: "DELETE", path: "/fhirgate/Project", status: 405},
		{name: "wrong method on instance", method: "POST", path: "/fhirgate/Project/p1", status: 405},
		{name: "read-only type", method: "POST", path: "/fhirgate/AuditEvent", contentType: "application/json", body: `{}`, status: 405},
		{name: "deploy with GET", method: "GET", path: "/fhirgate/Bot/" + botID + "/$deploy", status: 405},
		{name: "not JSON", method: "POST", path: "/fhirgate/User", contentType: "text/plain", body: `x`, status: 415},
		{name: "no content type", method: "POST", path: "/fhirgate/User", body: `{}`, status: 415},
		{name: "bad JSON", method: "POST", path: "/fhirgate/User", contentType: "application/json", body: `{"email":`, status: 400},
		{name: "empty body", method: "POST", path: "/fhirgate/User", contentType: "application/json", body: ``, status: 400, textContains: "empty body"},
		{name: "unknown field", method: "POST", path: "/fhirgate/User", contentType: "application/json", body: `{"emial":"x@y.z"}`, status: 400, textContains: "emial"},
		{name: "wrong field type", method: "POST", path: "/fhirgate/User", contentType: "application/json", body: `{"email":5}`, status: 400, textContains: "email"},
		{name: "resourceType mismatch", method: "POST", path: "/fhirgate/User", contentType: "application/json", body: `{"resourceType":"Bot","email":"a@b.c"}`, status: 400, textContains: "resourceType"},
		{name: "id mismatch", method: "PUT", path: "/fhirgate/Project/p1", contentType: "application/json", body: `{"id":"p2","name":"x"}`, status: 400, textContains: "id"},
		{name: "client scope grammar", method: "POST", path: "/fhirgate/ClientApplication", contentType: "application/json", body: `{"meta":{"project":"p1"},"scope":"openid user/Observation.rx"}`, status: 400, textContains: "scope"},
		{name: "missing required", method: "POST", path: "/fhirgate/User", contentType: "application/json", body: `{}`, status: 400, textContains: "email"},
		{name: "duplicate email", method: "POST", path: "/fhirgate/User", contentType: "application/json", body: `{"email":"BOB@example.com"}`, status: 409},
		{name: "duplicate bot identifier", method: "POST", path: "/fhirgate/Bot", contentType: "application/json", body: `{"name":"c","meta":{"project":"p1"},"identifier":[{"system":"s","value":"v"}]}`, status: 409},
		{name: "unknown Bot element", method: "POST", path: "/fhirgate/Bot", contentType: "application/json", body: `{"name":"c","meta":{"project":"p1"},"colour":"red"}`, status: 400, textContains: "colour"},
		{name: "bad Bot schedule", method: "POST", path: "/fhirgate/Bot", contentType: "application/json", body: `{"name":"c","meta":{"project":"p1"},"cronString":"soon"}`, status: 400, textContains: "cronString"},
		{name: "stale If-Match", method: "PUT", path: "/fhirgate/Project/p1", contentType: "application/json", body: `{"name":"x"}`, headers: []string{"If-Match", `W/"stale"`}, status: 409},
		{name: "current If-Match", method: "PUT", path: "/fhirgate/Project/p1", contentType: "application/json", body: `{"name":"x"}`, headers: []string{"If-Match", `W/"` + version + `"`}, status: 200},
		{name: "project in use", method: "DELETE", path: "/fhirgate/Project/p1", status: 409},
		{name: "unknown search parameter", method: "GET", path: "/fhirgate/User?emial=x", status: 400, textContains: "emial"},
		{name: "repeated search parameter", method: "GET", path: "/fhirgate/User?email=a&email=b", status: 400},
		{name: "body too large", method: "POST", path: "/fhirgate/User", contentType: "application/json", body: `{"email":"` + strings.Repeat("a", 5000) + `@x.y"}`, status: 413},
		{name: "deploy unknown bot", method: "POST", path: "/fhirgate/Bot/nope/$deploy", contentType: "application/json", body: `{"code":"x"}`, status: 404},
		{name: "deploy without code", method: "POST", path: "/fhirgate/Bot/" + botID + "/$deploy", contentType: "application/json", body: `{"filename":"a.ts"}`, status: 400, textContains: "code"},
		{name: "deploy compile error", method: "POST", path: "/fhirgate/Bot/" + botID + "/$deploy", contentType: "application/json", body: `{"code":"syntax error","filename":"index.ts"}`, status: 400, textContains: "index.ts:2:7"},
		{name: "restore wrong type", method: "POST", path: "/fhirgate/restore", contentType: "application/json", body: `{}`, status: 415},
		{name: "rotate unavailable", method: "POST", path: "/fhirgate/keys/rotate", status: 501},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out, _ := a.do(tt.method, tt.path, tt.contentType, tt.body, tt.headers...)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %v", status, tt.status, out)
			}
			if out["resourceType"] != "OperationOutcome" && status >= 400 {
				t.Fatalf("error body is not an OperationOutcome: %v", out)
			}
			if tt.textContains != "" && !strings.Contains(outcomeText(out), tt.textContains) {
				t.Fatalf("outcome %q does not mention %q", outcomeText(out), tt.textContains)
			}
		})
	}
}

func TestAdminAPIBackupRestoreRoundTrip(t *testing.T) {
	a := newTestAPI(t)
	a.do("PUT", "/fhirgate/Project/p1", "application/json", `{"name":"P1"}`)
	userID := a.mustCreate("User", `{"email":"carol@example.com"}`)

	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, httptest.NewRequest("GET", "/fhirgate/backup", nil))
	if rec.Code != 200 || rec.Body.Len() == 0 {
		t.Fatalf("backup: %d, %d bytes", rec.Code, rec.Body.Len())
	}
	backup := rec.Body.Bytes()

	b := newTestAPI(t)
	req := httptest.NewRequest("POST", "/fhirgate/restore", io.NopCloser(bytes.NewReader(backup)))
	req.Header.Set("Content-Type", "application/octet-stream")
	rec = httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("restore: %d %s", rec.Code, rec.Body)
	}
	if status, out, _ := b.do("GET", "/fhirgate/User/"+userID, "", ""); status != 200 || out["email"] == nil {
		t.Fatalf("restored user: %d %v", status, out)
	}
	if u, err := b.st.UserByEmail(context.Background(), "CAROL@example.com"); err != nil || u.ID != userID {
		t.Fatalf("restored email index: %v %v", u, err)
	}
}

func TestAdminAPIManagesClientScope(t *testing.T) {
	a := newTestAPI(t)
	a.do("PUT", "/fhirgate/Project/p1", "application/json", `{"name":"P1"}`)
	status, out, _ := a.do("PUT", "/fhirgate/ClientApplication/app", "application/json",
		`{"meta":{"project":"p1"},"scope":"openid  patient/*.rs launch/patient"}`)
	if status != http.StatusCreated || out["scope"] != "openid patient/*.rs launch/patient" {
		t.Fatalf("create: %d %v", status, out)
	}
	status, out, _ = a.do("PUT", "/fhirgate/ClientApplication/app", "application/json", `{"meta":{"project":"p1"}}`)
	if status != http.StatusOK || out["scope"] != nil {
		t.Fatalf("scope removed: %d %v", status, out)
	}
}

package e2e

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestCrossProjectIsolation has a user of one project go after another
// project's bots, jobs and clients through every route, with the other
// project's real ids (read through the admin API, as if leaked) and with
// guessed ones. Every fhirgate route must answer 404 exactly as for an id
// that does not exist — never 403, never 200 — and nothing of the other
// project may change or show.
func TestCrossProjectIsolation(t *testing.T) {
	s := startStack(t, "bot_timeout 5s")
	aliceTok := s.signIn(t, "alpha-app", "alice-token") // admin of alpha
	bobTok := s.signIn(t, "beta-app", "bob-token")      // member of beta
	alice := []string{"Authorization", "Bearer " + aliceTok["access_token"].(string)}
	bob := []string{"Authorization", "Bearer " + bobTok["access_token"].(string)}
	base := s.gateway + "/fhir/R4"

	// Beta's records. A bot whose identifier exists only in beta, so a
	// lookup by identifier cannot fall back to alpha's own bot.
	betaOnly := s.adminCall(t, "POST", "/fhirgate/Bot", mustJSON(t, map[string]any{
		"resourceType": "Bot", "name": "beta-only", "meta": map[string]any{"project": "beta"},
		"identifier": []map[string]string{{"system": "https://example.com/bots", "value": "beta-only"}},
	})).json(t)["id"].(string)
	s.adminCall(t, "POST", "/fhirgate/Bot/"+betaOnly+"/$deploy", mustJSON(t, map[string]string{
		"filename": "index.ts", "code": `export async function handler() { return 'beta secret output'; }`}))
	betaEcho := s.botID(t, "beta", "https://example.com/bots|echo")
	alphaEcho := s.botID(t, "alpha", "https://example.com/bots|echo")
	before := s.adminCall(t, "GET", "/fhirgate/Bot/"+betaOnly, "").json(t)
	betaBots := len(s.adminCall(t, "GET", "/fhirgate/Bot?project=beta", "").json(t)["entry"].([]any))

	// Bob runs beta's bots, synchronously and as a job.
	if r := do(t, "POST", base+"/Bot/"+betaOnly+"/$execute", "text/plain", "x", bob...); r.status != 200 || string(r.body) != "beta secret output" {
		t.Fatalf("bob runs his bot: %d %s", r.status, r.body)
	}
	r := do(t, "POST", base+"/Bot/"+betaOnly+"/$execute", "text/plain", "x", append(bob, "Prefer", "respond-async")...)
	betaJob, _ := url.Parse(r.header.Get("Content-Location"))
	if r.status != 202 || betaJob == nil {
		t.Fatalf("bob's async run: %d %s", r.status, r.body)
	}
	pollJob(t, betaJob.String(), bob, "completed")
	betaJobID := strings.Split(strings.TrimPrefix(betaJob.Path, "/fhir/R4/job/"), "/")[0]
	// Alice's own job, for bob to go after.
	r = do(t, "POST", base+"/Bot/"+alphaEcho+"/$execute", "text/plain", "x", append(alice, "Prefer", "respond-async")...)
	alphaJob, _ := url.Parse(r.header.Get("Content-Location"))
	if r.status != 202 || alphaJob == nil {
		t.Fatalf("alice's async run: %d %s", r.status, r.body)
	}
	// Beta's audit events, as an operator would list them.
	var betaAudit string
	for deadline := time.Now().Add(10 * time.Second); betaAudit == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		entries, _ := s.adminCall(t, "GET", "/fhirgate/AuditEvent?bot="+betaOnly, "").json(t)["entry"].([]any)
		if len(entries) > 0 {
			betaAudit = entries[0].(map[string]any)["resource"].(map[string]any)["id"].(string)
		}
	}
	if betaAudit == "" {
		t.Fatal("no audit event for beta's bot")
	}

	botBody := func(id string) string {
		return `{"resourceType":"Bot","id":"` + id + `","name":"taken over","identifier":[{"system":"https://example.com/bots","value":"beta-only"}]}`
	}
	deploy := `{"code":"export async function handler() { return 'pwned'; }","filename":"index.ts"}`
	type attempt struct {
		name, method, path, contentType, body string
		headers                               []string
	}
	var attempts []attempt
	botAttempts := func(who, id string, auth []string) {
		for _, a := range []attempt{
			{"read", "GET", "/Bot/" + id, "", "", nil},
			{"update", "PUT", "/Bot/" + id, "application/fhir+json", botBody(id), nil},
			{"update without id in body", "PUT", "/Bot/" + id, "application/fhir+json", botBody(""), nil},
			{"delete", "DELETE", "/Bot/" + id, "", "", nil},
			{"patch", "PATCH", "/Bot/" + id, "application/json-patch+json", `[]`, nil},
			{"deploy", "POST", "/Bot/" + id + "/$deploy", "application/json", deploy, nil},
			{"run", "POST", "/Bot/" + id + "/$execute", "text/plain", "x", nil},
			{"run by GET", "GET", "/Bot/" + id + "/$execute?a=1", "", "", nil},
			{"run async", "POST", "/Bot/" + id + "/$execute", "text/plain", "x", []string{"Prefer", "respond-async"}},
			{"run with extra path", "POST", "/Bot/" + id + "/$execute/x", "text/plain", "x", nil},
			{"history", "GET", "/Bot/" + id + "/_history", "", "", nil},
			{"read with a trailing slash", "GET", "/Bot/" + id + "/", "", "", nil},
			{"read through dot segments", "GET", "/Bot/" + alphaEcho + "/../" + id, "", "", nil},
			{"deploy through dot segments", "POST", "/Bot/" + alphaEcho + "/../" + id + "/$deploy", "application/json", deploy, nil},
			{"run through encoded dots", "POST", "/Bot/x/%2e%2e/" + id + "/$execute", "text/plain", "x", nil},
		} {
			a.name = who + " " + a.name + " " + id
			a.headers = append(append([]string{}, auth...), a.headers...)
			attempts = append(attempts, a)
		}
	}
	// ("..", "%2e%2e" and the like leave the Bot routes altogether: the
	// hostile-request suite covers them.)
	guessed := []string{uuid.NewString(), "00000000-0000-0000-0000-000000000000", "beta", "echo", "beta-only",
		strings.ToUpper(betaOnly), betaOnly + "x", betaOnly[:8], betaOnly + ";x"}
	for _, id := range append([]string{betaOnly, betaEcho}, guessed...) {
		botAttempts("alice:", id, alice)
	}
	botAttempts("bob:", alphaEcho, bob) // a non-admin of beta after alpha's bot: 404, not 403
	for _, ident := range []string{"https://example.com/bots|beta-only", "beta-only", "|beta-only", "https://example.com/bots|beta-only|x", "https://example.com/bots%7Cbeta-only"} {
		q := "/Bot/$execute?identifier=" + url.QueryEscape(ident)
		if strings.Contains(ident, "%") {
			q = "/Bot/$execute?identifier=" + ident
		}
		attempts = append(attempts,
			attempt{"alice: run by identifier " + ident, "POST", q, "text/plain", "x", alice},
			attempt{"alice: run by identifier by GET " + ident, "GET", q, "", "", alice},
			attempt{"alice: run by identifier async " + ident, "POST", q, "text/plain", "x", append(append([]string{}, alice...), "Prefer", "respond-async")},
		)
	}
	for _, job := range []string{betaJobID, uuid.NewString(), strings.ToUpper(betaJobID), betaJobID + "x"} {
		attempts = append(attempts,
			attempt{"alice: job status " + job, "GET", "/job/" + job + "/status", "", "", alice},
			attempt{"alice: job status through dot segments " + job, "GET", "/job/x/../" + job + "/status", "", "", alice},
		)
	}
	attempts = append(attempts, attempt{"bob: alice's job", "GET", strings.TrimPrefix(alphaJob.Path, "/fhir/R4"), "", "", bob})

	for _, a := range attempts {
		t.Run(a.name, func(t *testing.T) {
			backend := s.backend.count.Load()
			r := do(t, a.method, base+a.path, a.contentType, a.body, a.headers...)
			if r.status != 404 {
				t.Fatalf("%s %s: %d, want 404: %s", a.method, a.path, r.status, r.body)
			}
			if !strings.Contains(string(r.body), `"OperationOutcome"`) {
				t.Fatalf("not an OperationOutcome: %s", r.body)
			}
			for _, secret := range []string{"beta secret output", `"project":"beta"`, betaAudit} {
				if strings.Contains(string(r.body), secret) {
					t.Fatalf("the answer shows %q: %s", secret, r.body)
				}
			}
			if s.backend.count.Load() != backend {
				t.Fatal("the request was proxied to the backend")
			}
		})
	}

	// Searches answer a bundle of the caller's own bots only.
	for _, q := range []string{"", "?identifier=" + url.QueryEscape("https://example.com/bots|beta-only"), "?identifier=beta-only", "?name=beta", "?name=echo"} {
		t.Run("alice: search "+q, func(t *testing.T) {
			r := do(t, "GET", base+"/Bot"+q, "", "", alice...)
			if r.status != 200 || r.json(t)["resourceType"] != "Bundle" {
				t.Fatalf("%d %s", r.status, r.body)
			}
			for _, id := range []string{betaOnly, betaEcho} {
				if strings.Contains(string(r.body), id) {
					t.Fatalf("the search shows beta's bot %s: %s", id, r.body)
				}
			}
		})
	}

	// A bot created with beta in its body lands in alice's own project.
	t.Run("alice: create with beta's project", func(t *testing.T) {
		r := do(t, "POST", base+"/Bot", "application/fhir+json",
			`{"resourceType":"Bot","name":"sneaky","meta":{"project":"beta"},"identifier":[{"system":"https://example.com/bots","value":"beta-only"}]}`, alice...)
		if r.status != 201 || r.json(t)["meta"].(map[string]any)["project"] != "alpha" {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})

	// Clients: another project's client refuses alpha's people, and a
	// client cannot act on tokens issued to another.
	form := "application/x-www-form-urlencoded"
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"exchange through beta's client", "/oauth2/token", url.Values{
			"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "client_id": {"beta-app"},
			"subject_token": {"alice-token"}, "subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"}}.Encode(), 400, "invalid_grant"},
		{"exchange into bob's membership", "/oauth2/token", url.Values{
			"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "client_id": {"alpha-app"},
			"subject_token": {"alice-token"}, "subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
			"membership_id": {s.membershipID(t, "beta")}}.Encode(), 400, "invalid_grant"},
		{"refresh bob's token as alpha's client", "/oauth2/token", url.Values{
			"grant_type": {"refresh_token"}, "refresh_token": {bobTok["refresh_token"].(string)}, "client_id": {"alpha-app"}}.Encode(), 400, "invalid_grant"},
		{"revoke bob's token as alpha's client", "/oauth2/revoke", url.Values{
			"token": {bobTok["access_token"].(string)}, "client_id": {"alpha-app"}}.Encode(), 400, "unauthorized_client"},
	} {
		t.Run("alice: "+tc.name, func(t *testing.T) {
			r := do(t, "POST", s.gateway+tc.path, form, tc.body)
			if r.status != tc.status || r.json(t)["error"] != tc.code {
				t.Fatalf("%d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
		})
	}
	t.Run("alice: introspect bob's token as alpha's client", func(t *testing.T) {
		r := do(t, "POST", s.gateway+"/oauth2/introspect", form, url.Values{"token": {bobTok["access_token"].(string)}, "client_id": {"alpha-app"}}.Encode())
		if r.status != 200 || r.json(t)["active"] != false || strings.Contains(string(r.body), "bob") {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})

	t.Run("alice: session shows only alpha", func(t *testing.T) {
		r := do(t, "GET", s.gateway+"/auth/me", "", "", alice...)
		if r.status != 200 || strings.Contains(string(r.body), "beta") || strings.Contains(string(r.body), "Practitioner/bob") {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})

	// Audit events are not served on the FHIR API: a guess goes to the
	// backend as alice, and fhirgate adds nothing of beta's to it.
	t.Run("alice: beta's audit event on the FHIR API", func(t *testing.T) {
		r := do(t, "GET", base+"/AuditEvent?entity=Bot/"+betaOnly, "", "", alice...)
		got := s.backend.last()
		if r.status != 200 || got.Header.Get("X-Fhirgate-Project") != "alpha" || strings.Contains(string(r.body), betaOnly) {
			t.Fatalf("%d %s (backend saw project %q)", r.status, r.body, got.Header.Get("X-Fhirgate-Project"))
		}
	})

	// Nothing of beta's changed, and bob still works.
	t.Run("beta is untouched", func(t *testing.T) {
		after := s.adminCall(t, "GET", "/fhirgate/Bot/"+betaOnly, "").json(t)
		if mustJSON(t, after) != mustJSON(t, before) {
			t.Fatalf("beta's bot changed:\n%v\n%v", before, after)
		}
		if r := do(t, "POST", base+"/Bot/$execute?identifier="+url.QueryEscape("https://example.com/bots|beta-only"), "text/plain", "x", bob...); r.status != 200 ||
			string(r.body) != "beta secret output" {
			t.Fatalf("bob's run: %d %s", r.status, r.body)
		}
		bots := s.adminCall(t, "GET", "/fhirgate/Bot?project=beta", "").json(t)["entry"].([]any)
		if len(bots) != betaBots {
			t.Fatalf("beta has %d bots, want its %d", len(bots), betaBots)
		}
	})
	t.Logf("isolation: %d routes tried with beta's real and guessed ids", len(attempts))
}

// membershipID returns the id of a project's first membership.
func (s *stack) membershipID(t *testing.T, project string) string {
	t.Helper()
	entries, _ := s.adminCall(t, "GET", "/fhirgate/ProjectMembership?project="+project, "").json(t)["entry"].([]any)
	if len(entries) == 0 {
		t.Fatalf("no membership in %s", project)
	}
	return entries[0].(map[string]any)["resource"].(map[string]any)["id"].(string)
}

package e2e

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/email/smtptest"
)

// The Medplum-compatible @medplum/core of the sandbox through the built Caddy: a bot importing
// code systems and FHIRPath, catching a backend's not-found, throwing an OperationOutcomeError and
// sending email through a real SMTP server on loopback; and $deploy refusing a missing import.
func TestMedplumCoreBot(t *testing.T) {
	smtp := smtptest.Start(t, "", "")
	tmpl := strings.Replace(stackCaddyfile, "\t\tproject alpha {\n", "\t\tproject alpha {\n"+
		"\t\t\temail_senders alerts@example.com\n"+
		"\t\t\tbot medplumcore {\n\t\t\t\tidentifier https://example.com/bots|medplumcore\n\t\t\t\tsource {{.Testdata}}/medplumcore.ts\n\t\t\t}\n", 1)
	s := startStackWith(t, tmpl, "email {\n\t\t\tsmtp "+smtp.Addr+"\n\t\t\tfrom bots@example.com\n\t\t\ttls off\n\t\t\trate_limit 2 1h\n\t\t}")
	alice := s.token(t, "alpha-app", "alice-token")
	auth := []string{"Authorization", "Bearer " + alice}
	id := s.botID(t, "alpha", "https://example.com/bots|medplumcore")
	execute := s.gateway + "/fhir/R4/Bot/" + id + "/$execute"

	r := do(t, "POST", execute, "application/json", `{}`, auth...)
	want := `{"loinc":"http://loinc.org","system":"http://snomed.info/sct","family":["Lee"],"caught":[true,"Not found"]}`
	if r.status != 200 || string(r.body) != want {
		t.Fatalf("run: %d %s\nwant %s", r.status, r.body, want)
	}
	created := false
	s.backend.mu.Lock()
	for _, req := range s.backend.requests {
		created = created || req.Method == "POST" && strings.HasSuffix(req.URL.Path, "/Condition")
	}
	s.backend.mu.Unlock()
	if !created {
		t.Error("the Condition did not reach the backend")
	}

	// Medplum answers a thrown OperationOutcomeError with its own outcome, status 400.
	r = do(t, "POST", execute, "application/json", `{"what":"throw"}`, auth...)
	want = `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"required","diagnostics":"Missing required parameter(s): member-name"}]}`
	if r.status != 400 || string(r.body) != want {
		t.Errorf("throw: %d %s\nwant %s", r.status, r.body, want)
	}

	// getAccessToken: a token acting as the run's identity while the run lasts, refused once it has
	// ended — the bot's own (Bot/{id}, Medplum's default) and, with runAsUser, alice's.
	runToken := func(who string) {
		t.Helper()
		seen := map[string]bool{}
		s.backend.mu.Lock()
		for _, req := range s.backend.requests {
			seen[req.URL.Query().Get("run-token")] = true
		}
		s.backend.mu.Unlock()
		done := make(chan response, 1)
		go func() { done <- do(t, "POST", execute, "application/json", `{"what":"token"}`, auth...) }()
		token := ""
		for deadline := time.Now().Add(10 * time.Second); token == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			s.backend.mu.Lock()
			for _, req := range s.backend.requests {
				if v := req.URL.Query().Get("run-token"); v != "" && !seen[v] {
					token = v
				}
			}
			s.backend.mu.Unlock()
		}
		if token == "" {
			r := <-done
			t.Fatalf("%s: the bot's token did not reach the backend; the run answered %d %s", who, r.status, r.body)
		}
		if r := do(t, "GET", s.gateway+"/fhir/R4/Patient/1", "", "", "Authorization", "Bearer "+token); r.status != 200 {
			t.Errorf("%s: the run's token during the run: %d %s", who, r.status, r.body)
		}
		if r := <-done; r.status != 200 || string(r.body) != `{"same":true}` {
			t.Errorf("%s: token run: %d %s", who, r.status, r.body)
		}
		if r := do(t, "GET", s.gateway+"/fhir/R4/Patient/1", "", "", "Authorization", "Bearer "+token); r.status != 401 {
			t.Errorf("%s: the run's token after the run: %d %s", who, r.status, r.body)
		}
	}
	runToken("as itself")
	botURL := s.gateway + "/fhir/R4/Bot/" + id
	bot := do(t, "GET", botURL, "", "", auth...).json(t)
	bot["runAsUser"] = true
	if r := do(t, "PUT", botURL, "application/fhir+json", mustJSON(t, bot), auth...); r.status != 200 {
		t.Fatalf("PUT Bot with runAsUser: %d %s", r.status, r.body)
	}
	runToken("runAsUser")

	r = do(t, "POST", execute, "application/json", `{"what":"urls"}`, auth...)
	want = `["` + s.gateway + `/fhir/R4/Patient/1","` + s.gateway + `/fhir/R4/Patient?name=x","` + s.gateway + `/"]`
	if r.status != 200 || string(r.body) != want {
		t.Errorf("urls: %d %s\nwant %s", r.status, r.body, want)
	}

	r = do(t, "POST", execute, "application/json", `{"what":"email"}`, auth...)
	if r.status != 200 || !strings.Contains(string(r.body), `"All OK"`) {
		t.Fatalf("email: %d %s", r.status, r.body)
	}
	r = do(t, "POST", execute, "application/json", `{"what":"email","from":"alerts@example.com"}`, auth...)
	if r.status != 200 {
		t.Fatalf("email from an allowed sender: %d %s", r.status, r.body)
	}
	got := smtp.Received()
	if len(got) != 2 || got[0].From != "bots@example.com" || got[1].From != "alerts@example.com" ||
		strings.Join(got[0].To, ",") != "ann@example.com" || !strings.Contains(got[0].Data, "LOINC http://loinc.org") {
		t.Errorf("the SMTP server received %+v", got)
	}
	r = do(t, "POST", execute, "application/json", `{"what":"email","from":"ceo@example.com"}`, auth...)
	if r.status != 400 || !strings.Contains(string(r.body), "may not send email from ceo@example.com") {
		t.Errorf("email from another sender: %d %s", r.status, r.body)
	}
	// The project's rate (2 an hour) is spent: an outcome with Medplum's too-many-requests id.
	r = do(t, "POST", execute, "application/json", `{"what":"email"}`, auth...)
	if r.status != 400 || !strings.Contains(string(r.body), `"id":"too-many-requests"`) || !strings.Contains(string(r.body), "2 emails") {
		t.Errorf("email over the rate: %d %s", r.status, r.body)
	}

	// $deploy refuses a named import the sandbox's @medplum/core lacks, naming it.
	code, _ := json.Marshal(map[string]string{
		"filename": "index.ts",
		"code":     "import { SNOMEDCT } from '@medplum/core';\nexport async function handler() { return SNOMEDCT; }",
	})
	r = do(t, "POST", s.gateway+"/fhir/R4/Bot/"+url.PathEscape(id)+"/$deploy", "application/json", string(code), auth...)
	if r.status != 400 || !strings.Contains(string(r.body), "'@medplum/core' has no export named 'SNOMEDCT'") {
		t.Errorf("deploy: %d %s", r.status, r.body)
	}
}

package e2e

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestBotsThroughTheFHIRAPI manages a bot the way Medplum's CLI does:
// create, search, deploy, execute, update, delete; admins only, and other
// projects' bots invisible.
func TestBotsThroughTheFHIRAPI(t *testing.T) {
	s := startStack(t, "")
	alice := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")} // admin of alpha
	bob := []string{"Authorization", "Bearer " + s.token(t, "beta-app", "bob-token")}      // member of beta, not admin
	base := s.gateway + "/fhir/R4/Bot"

	r := do(t, "POST", base, "application/fhir+json", `{"resourceType":"Bot","name":"cli-bot","identifier":[{"system":"https://example.com/bots","value":"cli"}]}`, alice...)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id := r.json(t)["id"].(string)
	if r.header.Get("Location") != "/fhir/R4/Bot/"+id || r.json(t)["meta"].(map[string]any)["project"] != "alpha" {
		t.Fatalf("create answer %v %s", r.header, r.body)
	}

	r = do(t, "GET", base+"?identifier="+url.QueryEscape("https://example.com/bots|cli"), "", "", alice...)
	if r.status != 200 || r.json(t)["resourceType"] != "Bundle" || !strings.Contains(string(r.body), id) {
		t.Fatalf("search: %d %s", r.status, r.body)
	}

	code := `import { BotEvent, MedplumClient } from '@medplum/core';
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<string> {
  return 'deployed via FHIR: ' + (event.input as string);
}`
	r = do(t, "POST", base+"/"+id+"/$deploy", "application/json", mustJSON(t, map[string]string{"code": code, "filename": "index.ts"}), alice...)
	if r.status != 200 || !strings.Contains(string(r.body), "All OK") {
		t.Fatalf("deploy: %d %s", r.status, r.body)
	}
	r = do(t, "POST", base+"/"+id+"/$execute", "text/plain", "hi", alice...)
	if r.status != 200 || string(r.body) != "deployed via FHIR: hi" {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	r = do(t, "POST", base+"/"+id+"/$deploy", "application/json", `{"code":"export const handler = (","filename":"index.ts"}`, alice...)
	if r.status != 400 || !strings.Contains(string(r.body), "index.ts:1:") {
		t.Fatalf("deploy of broken code: %d %s", r.status, r.body)
	}

	r = do(t, "PUT", base+"/"+id, "application/fhir+json", `{"resourceType":"Bot","id":"`+id+`","name":"renamed","identifier":[{"system":"https://example.com/bots","value":"cli"}]}`, alice...)
	if r.status != 200 || r.json(t)["name"] != "renamed" || r.json(t)["executableCode"] == nil {
		t.Fatalf("update (code must survive): %d %s", r.status, r.body)
	}

	for _, tc := range []struct {
		name, method, url, body string
		auth                    []string
		status                  int
	}{
		{"non-admin search", "GET", base, "", bob, 403},
		{"non-admin create", "POST", base, `{"resourceType":"Bot","name":"x"}`, bob, 403},
		{"other project's bot read", "GET", base + "/" + id, "", bob, 404},
		{"other project's bot deploy", "POST", base + "/" + id + "/$deploy", `{"code":"x"}`, bob, 404},
		{"other project's bot delete", "DELETE", base + "/" + id, "", bob, 404},
		{"unsupported sub-path", "GET", base + "/" + id + "/_history/1/x", "", alice, 404},
		{"no token", "GET", base, "", nil, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct := ""
			if tc.body != "" {
				ct = "application/fhir+json"
			}
			if r := do(t, tc.method, tc.url, ct, tc.body, tc.auth...); r.status != tc.status {
				t.Fatalf("%d, want %d: %s", r.status, tc.status, r.body)
			}
		})
	}

	if r := do(t, "DELETE", base+"/"+id, "", "", alice...); r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", base+"/"+id, "", "", alice...); r.status != 404 {
		t.Fatalf("read after delete: %d", r.status)
	}
	if n := s.backend.count.Load(); n != 0 {
		t.Fatalf("Bot requests were proxied to the backend %d times", n)
	}
}

// TestAsyncExecuteAndRestart runs a bot with Prefer: respond-async, polls
// the job, and checks a job cut off by a crash is reported failed after
// the restart (the queue rescues it) instead of being lost or run again.
func TestAsyncExecuteAndRestart(t *testing.T) {
	s := startStack(t, "bot_timeout 30s")
	alice := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	echo := s.gateway + "/fhir/R4/Bot/" + s.botID(t, "alpha", "https://example.com/bots|echo") + "/$execute"

	r := do(t, "POST", echo, "application/json", `{"async":true}`, append(alice, "Prefer", "respond-async")...)
	if r.status != 202 || r.header.Get("Content-Location") == "" {
		t.Fatalf("async execute: %d %v %s", r.status, r.header, r.body)
	}
	status := r.header.Get("Content-Location")
	job := pollJob(t, status, alice, "completed")
	if !strings.Contains(mustJSON(t, job["output"]), `{\"async\":true}`) {
		t.Fatalf("job output %v", job["output"])
	}
	if r := do(t, "GET", status, "", "", "Authorization", "Bearer "+s.token(t, "beta-app", "bob-token")); r.status != 404 {
		t.Fatalf("another project's job: %d", r.status)
	}

	loop := s.gateway + "/fhir/R4/Bot/" + s.botID(t, "alpha", "https://example.com/bots|misbehave") + "/$execute"
	before := s.backend.count.Load()
	r = do(t, "POST", loop, "application/json", `{"what":"read-then-loop"}`, append(alice, "Prefer", "respond-async")...)
	if r.status != 202 {
		t.Fatalf("async loop: %d %s", r.status, r.body)
	}
	stuck := r.header.Get("Content-Location")
	if got := do(t, "GET", stuck, "", "", alice...); got.status != 202 {
		t.Fatalf("running job status: %d %s", got.status, got.body)
	}
	// Kill only once the queue has started the run (the bot's first act
	// reaches the backend): a job killed before it started is run after
	// the restart, as it should be, and this test is about a run cut off.
	deadline := time.Now().Add(20 * time.Second)
	for s.backend.count.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("the async run never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.kill()
	s.start(s.config)
	job = pollJob(t, stuck, alice, "error")
	if !strings.Contains(mustJSON(t, job["output"]), "not run again") {
		t.Fatalf("interrupted job output %v", job["output"])
	}
}

func pollJob(t *testing.T, statusURL string, auth []string, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := do(t, "GET", statusURL, "", "", auth...)
		job := r.json(t)
		if job["status"] == want && r.status == 200 {
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("job at %s: %d %s", statusURL, r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

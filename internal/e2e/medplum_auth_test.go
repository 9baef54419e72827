package e2e

import (
	"strings"
	"testing"
)

func TestAuthMeAnswersMedplumSessionShape(t *testing.T) {
	s := startStack(t, "")
	alice := s.token(t, "alpha-app", "alice-token")

	r := do(t, "GET", s.gateway+"/auth/me", "", "", "Authorization", "Bearer "+alice, "X-Medplum", "extended")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	me := r.json(t)
	profile := me["profile"].(map[string]any)
	if profile["resourceType"] != "Practitioner" || profile["id"] != "alice" || !strings.Contains(string(r.body), "FromBackend") {
		t.Fatalf("profile was not read from the backend: %s", r.body)
	}
	if me["project"].(map[string]any)["id"] != "alpha" || me["membership"].(map[string]any)["admin"] != true {
		t.Fatalf("session %s", r.body)
	}
	if got := s.backend.last(); got == nil || got.URL.Path != "/fhir/R4/Practitioner/alice" || got.Header.Get("X-Fhirgate-Profile") != "Practitioner/alice" {
		t.Fatalf("backend request %v", got)
	}

	if r := do(t, "GET", s.gateway+"/auth/me", "", ""); r.status != 401 {
		t.Fatalf("unauthenticated /auth/me: %d", r.status)
	}
}

func TestAuthMeFallsBackToAMinimalProfile(t *testing.T) {
	s := startStack(t, "")
	s.backend.Close() // the backend is down: the session still works
	alice := s.token(t, "alpha-app", "alice-token")
	r := do(t, "GET", s.gateway+"/auth/me", "", "", "Authorization", "Bearer "+alice)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if p := r.json(t)["profile"].(map[string]any); p["resourceType"] != "Practitioner" || p["id"] != "alice" {
		t.Fatalf("profile %v", p)
	}
}

func TestLegacyAuthExchange(t *testing.T) {
	s := startStack(t, "")
	tests := []struct {
		name, contentType, body string
		status                  int
		contains                []string
	}{
		{"json", "application/json", `{"clientId":"alpha-app","externalAccessToken":"alice-token"}`, 200, []string{`"access_token"`, `"issued_token_type"`}},
		{"form", "application/x-www-form-urlencoded", "clientId=alpha-app&externalAccessToken=alice-token", 200, []string{`"access_token"`}},
		{"both missing", "application/json", `{}`, 400, []string{"Missing externalAccessToken", "Missing clientId", `"OperationOutcome"`}},
		{"client missing", "application/json", `{"externalAccessToken":"x"}`, 400, []string{"Missing clientId"}},
		{"provider rejects", "application/json", `{"clientId":"alpha-app","externalAccessToken":"bad"}`, 400, []string{`"invalid_grant"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, "POST", s.gateway+"/auth/exchange", tt.contentType, tt.body)
			if r.status != tt.status {
				t.Fatalf("%d %s", r.status, r.body)
			}
			for _, c := range tt.contains {
				if !strings.Contains(string(r.body), c) {
					t.Fatalf("body lacks %s: %s", c, r.body)
				}
			}
			if r.header.Get("Deprecation") == "" || r.header.Get("Sunset") == "" ||
				r.header.Get("Link") != `</oauth2/token>; rel="successor-version"` {
				t.Fatalf("deprecation headers %v", r.header)
			}
		})
	}
	if !strings.Contains(s.logs(), "deprecated /auth/exchange used") || !strings.Contains(s.logs(), `"client_id":"alpha-app"`) {
		t.Fatal("the deprecated use was not logged with the client")
	}
}

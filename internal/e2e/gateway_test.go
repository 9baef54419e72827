package e2e

import (
	"net/url"
	"strings"
	"testing"
)

// TestGatewayTokenLifecycle is issue 3's end-to-end test: exchange, a
// proxied read carrying the identity and not the caller's token, refusal
// without a token, refresh, key rotation, reload, and revocation effective
// on the very next request.
func TestGatewayTokenLifecycle(t *testing.T) {
	s := startStack(t, "")
	form := url.Values{
		"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"client_id":          {"alpha-app"},
		"subject_token":      {"alice-token"},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}
	r := do(t, "POST", s.gateway+"/oauth2/token", "application/x-www-form-urlencoded", form.Encode())
	if r.status != 200 || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("exchange: %d %v %s", r.status, r.header, r.body)
	}
	tok := r.json(t)
	access := tok["access_token"].(string)

	// No token: 401, and the backend is never asked.
	if r := do(t, "GET", s.gateway+"/fhir/R4/Patient/1", "", ""); r.status != 401 {
		t.Fatalf("no token: %d", r.status)
	}
	if n := s.backend.count.Load(); n != 0 {
		t.Fatalf("the backend saw %d unauthenticated requests", n)
	}

	r = do(t, "GET", s.gateway+"/fhir/R4/Patient/1", "", "", "Authorization", "Bearer "+access,
		"X-Fhirgate-User", "spoofed", "X-Fhirgate-Project", "beta")
	if r.status != 200 {
		t.Fatalf("proxied read: %d %s", r.status, r.body)
	}
	got := s.backend.last()
	if got.URL.Path != "/fhir/R4/Patient/1" || got.Header.Get("Authorization") != "" ||
		got.Header.Get("X-Fhirgate-Project") != "alpha" || got.Header.Get("X-Fhirgate-Profile") != "Practitioner/alice" ||
		got.Header.Get("X-Fhirgate-Client") != "alpha-app" || got.Header.Get("X-Fhirgate-User") == "spoofed" ||
		got.Header.Get("X-Fhirgate-Scope") != "openid offline" {
		t.Fatalf("backend request headers %v", got.Header)
	}

	// Discovery and keys.
	meta := do(t, "GET", s.gateway+"/.well-known/openid-configuration", "", "").json(t)
	if meta["token_endpoint"] != meta["issuer"].(string)+"/oauth2/token" {
		t.Fatalf("metadata %v", meta)
	}
	if r := do(t, "GET", s.gateway+"/.well-known/jwks.json", "", ""); !strings.Contains(string(r.body), `"kid"`) || strings.Contains(string(r.body), `"d"`) {
		t.Fatalf("jwks %s", r.body)
	}

	// Rotation: new tokens use the new key, the old one keeps working.
	if out, err := s.cli("fhirgate", "keys", "rotate", "--address", s.adminAddr); err != nil {
		t.Fatalf("keys rotate: %v %s", err, out)
	}
	if r := do(t, "GET", s.gateway+"/fhir/R4/Patient/2", "", "", "Authorization", "Bearer "+access); r.status != 200 {
		t.Fatalf("token signed before rotation: %d %s", r.status, r.body)
	}
	if keys := do(t, "GET", s.gateway+"/.well-known/jwks.json", "", "").json(t)["keys"].([]any); len(keys) != 2 {
		t.Fatalf("JWKS after rotation has %d keys, want old and new", len(keys))
	}

	// Refresh through the gateway rotates the refresh token.
	r = do(t, "POST", s.gateway+"/oauth2/token", "application/x-www-form-urlencoded",
		url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}, "client_id": {"alpha-app"}}.Encode())
	if r.status != 200 || r.json(t)["refresh_token"] == tok["refresh_token"] {
		t.Fatalf("refresh: %d %s", r.status, r.body)
	}
	refreshed := r.json(t)["access_token"].(string)

	// A reload keeps every issued token valid.
	if out, err := s.cli("reload", "--config", s.config, "--address", s.adminAddr, "--force"); err != nil {
		t.Fatalf("reload: %v %s", err, out)
	}
	for _, tk := range []string{access, refreshed} {
		if r := do(t, "GET", s.gateway+"/fhir/R4/Patient/3", "", "", "Authorization", "Bearer "+tk); r.status != 200 {
			t.Fatalf("token after reload: %d %s", r.status, r.body)
		}
	}

	// Revocation takes effect on the next request, for every token of the
	// sign-in.
	if r := do(t, "POST", s.gateway+"/oauth2/revoke", "application/x-www-form-urlencoded", url.Values{"token": {refreshed}}.Encode()); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	before := s.backend.count.Load()
	for _, tk := range []string{access, refreshed} {
		r := do(t, "GET", s.gateway+"/fhir/R4/Patient/4", "", "", "Authorization", "Bearer "+tk)
		if r.status != 401 || !strings.Contains(r.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Fatalf("revoked token: %d %v", r.status, r.header)
		}
	}
	if s.backend.count.Load() != before {
		t.Fatal("a revoked token reached the backend")
	}
}

// TestLongRefreshLifetime: a refresh_token_ttl beyond the token service's
// default maximum (two weeks) still signs people in with it.
func TestLongRefreshLifetime(t *testing.T) {
	s := startStack(t, "refresh_token_ttl 720h")
	form := url.Values{
		"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"client_id":          {"alpha-app"},
		"subject_token":      {"alice-token"},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}
	r := do(t, "POST", s.gateway+"/oauth2/token", "application/x-www-form-urlencoded", form.Encode())
	if r.status != 200 || r.json(t)["refresh_token"] == nil {
		t.Fatalf("exchange with a 30-day refresh lifetime: %d %s", r.status, r.body)
	}
}

package oauth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"

	"github.com/fhirgate/fhirgate/internal/authz"
)

func TestSMARTConfigurationClaimsOnlyWhatTheServerDoes(t *testing.T) {
	e := newEnv(t)
	rec := httptest.NewRecorder()
	e.srv.ServeSMARTConfiguration(rec, httptest.NewRequest("GET", "/fhir/R4/.well-known/smart-configuration", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		fail(t, rec, "smart-configuration")
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"issuer":                                testIssuer,
		"jwks_uri":                              testIssuer + "/.well-known/jwks.json",
		"token_endpoint":                        testIssuer + "/oauth2/token",
		"revocation_endpoint":                   testIssuer + "/oauth2/revoke",
		"introspection_endpoint":                testIssuer + "/oauth2/introspect",
		"grant_types_supported":                 []any{grantTokenExchange, "refresh_token", "client_credentials"},
		"token_endpoint_auth_methods_supported": []any{"none", "client_secret_basic", "client_secret_post", "private_key_jwt"},
		"response_types_supported":              []any{},
		"capabilities": []any{"client-public", "client-confidential-symmetric", "client-confidential-asymmetric", "permission-offline",
			"permission-patient", "permission-user", "permission-v1", "permission-v2"},
	}
	for k, v := range want {
		if !reflect.DeepEqual(doc[k], v) {
			t.Errorf("%s = %v, want %v", k, doc[k], v)
		}
	}
	// No authorization endpoint, so nothing of the browser launch.
	for _, absent := range []string{"authorization_endpoint", "code_challenge_methods_supported"} {
		if _, ok := doc[absent]; ok {
			t.Errorf("%s claimed", absent)
		}
	}
	caps := doc["capabilities"].([]any)
	for _, c := range caps {
		if s := c.(string); slices.Contains([]string{"launch-ehr", "launch-standalone", "sso-openid-connect", "context-ehr-patient"}, s) {
			t.Errorf("capability %q claimed", s)
		}
	}
	// Every scope listed parses and is granted as written to an
	// unrestricted client.
	scopes := doc["scopes_supported"].([]any)
	if len(scopes) == 0 {
		t.Fatal("no scopes_supported")
	}
	for _, s := range scopes {
		if got, err := authz.Grant(s.(string), ""); err != nil || got != s {
			t.Errorf("scope %q: granted %q, %v", s, got, err)
		}
	}

	rec = httptest.NewRecorder()
	e.srv.ServeSMARTConfiguration(rec, httptest.NewRequest("POST", "/.well-known/smart-configuration", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		fail(t, rec, "POST accepted")
	}

	rec = httptest.NewRecorder()
	e.srv.ServeMetadata(rec, httptest.NewRequest("GET", "/.well-known/oauth-authorization-server", nil))
	var meta map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &meta)
	if !reflect.DeepEqual(meta["scopes_supported"], scopes) {
		t.Fatalf("OAuth metadata scopes_supported %v, SMART's %v", meta["scopes_supported"], scopes)
	}
}

package oauth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
)

func decode(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		fail(t, rec, "body is not JSON")
	}
	return m
}

func TestExchangeFailures(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name       string
		form       url.Values
		basic      [2]string
		status     int
		code       string
		retryAfter string
		// idpCalls is how many times the provider must have been called
		// for the subject token after the request ran twice: a failure is
		// never cached, so twice what one request costs.
		idpCalls int
	}{
		{name: "missing grant_type", form: url.Values{"client_id": {"web"}}, status: 400, code: "invalid_request"},
		{name: "unsupported grant", form: url.Values{"grant_type": {"password"}}, status: 400, code: "unsupported_grant_type"},
		{name: "missing client_id", form: exchangeForm("", "alice"), status: 400, code: "invalid_request"},
		{name: "missing subject_token", form: exchangeForm("web", ""), status: 400, code: "invalid_request"},
		{name: "ID token for a client without jwks_uri", form: func() url.Values {
			f := exchangeForm("web", "alice")
			f.Set("subject_token_type", "urn:ietf:params:oauth:token-type:id_token")
			return f
		}(), status: 400, code: "invalid_request"},
		{name: "wrong subject_token_type", form: func() url.Values {
			f := exchangeForm("web", "alice")
			f.Set("subject_token_type", "urn:ietf:params:oauth:token-type:jwt")
			return f
		}(), status: 400, code: "invalid_request"},
		{name: "unknown client", form: exchangeForm("nope", "alice"), status: 401, code: "invalid_client"},
		{name: "client without identity provider", form: exchangeForm("no-idp", "alice"), status: 400, code: "unauthorized_client"},
		{name: "confidential client without secret", form: exchangeForm("secret-client", "alice"), status: 401, code: "invalid_client"},
		{name: "confidential client wrong secret", form: exchangeForm("secret-client", "alice"), basic: [2]string{"secret-client", "wrong"}, status: 401, code: "invalid_client"},
		{name: "bad scope characters", form: func() url.Values { f := exchangeForm("web", "alice"); f.Set("scope", "openid \"x"); return f }(), status: 400, code: "invalid_scope"},
		{name: "provider rejects token", form: exchangeForm("web", "rejected"), status: 400, code: "invalid_grant", idpCalls: 2},
		{name: "provider forbids", form: exchangeForm("web", "forbidden"), status: 400, code: "invalid_grant", idpCalls: 2},
		{name: "provider rate limits", form: exchangeForm("web", "ratelimited"), status: 429, code: "temporarily_unavailable", retryAfter: "7", idpCalls: 2},
		{name: "provider 500", form: exchangeForm("web", "server-error"), status: 503, code: "temporarily_unavailable", retryAfter: "5", idpCalls: 2},
		{name: "provider answers HTML", form: exchangeForm("web", "html"), status: 503, code: "temporarily_unavailable", idpCalls: 2},
		{name: "provider answers nothing", form: exchangeForm("web", "empty"), status: 503, code: "temporarily_unavailable", idpCalls: 2},
		{name: "provider answer too big", form: exchangeForm("web", "huge"), status: 503, code: "temporarily_unavailable", idpCalls: 2},
		{name: "provider too slow", form: exchangeForm("web", "slow"), status: 503, code: "temporarily_unavailable", idpCalls: 2},
		{name: "provider hangs mid-body", form: exchangeForm("web", "hang-body"), status: 503, code: "temporarily_unavailable", idpCalls: 2},
		{name: "provider redirects to another host", form: exchangeForm("web", "redirect-other"), status: 503, code: "temporarily_unavailable", idpCalls: 2},
		{name: "unverified email", form: exchangeForm("web", "unverified"), status: 400, code: "invalid_grant", idpCalls: 2},
		{name: "email without email_verified", form: exchangeForm("web", "verification-unsaid"), status: 400, code: "invalid_grant", idpCalls: 2},
		{name: "no email", form: exchangeForm("web", "no-email"), status: 400, code: "invalid_grant", idpCalls: 2},
		{name: "unknown email", form: exchangeForm("web", "nobody"), status: 400, code: "invalid_grant", idpCalls: 2},
		{name: "member of another project only", form: exchangeForm("web", "dave-other-project"), status: 400, code: "invalid_grant", idpCalls: 2},
		{name: "inactive membership", form: exchangeForm("web", "carol-inactive"), status: 400, code: "invalid_grant", idpCalls: 2},
		{name: "use_subject without sub match", form: exchangeForm("sub-client", "stranger-sub"), status: 400, code: "invalid_grant", idpCalls: 2},
		{name: "use_subject provider without sub", form: exchangeForm("sub-client", "no-email-no-sub"), status: 400, code: "invalid_grant", idpCalls: 2},
		{name: "membership_id of someone else", form: func() url.Values {
			f := exchangeForm("web", "alice-again")
			f.Set("membership_id", "not-hers")
			return f
		}(), status: 400, code: "invalid_grant", idpCalls: 1},
		{name: "repeated parameter", form: url.Values{"grant_type": {grantTokenExchange, grantTokenExchange}}, status: 400, code: "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec *httptest.ResponseRecorder
			for range 2 {
				start := time.Now()
				rec = e.post(e.srv.ServeToken, tt.form, tt.basic[0], tt.basic[1])
				if took := time.Since(start); took > 3*time.Second {
					t.Fatalf("took %v: the provider timeout (300ms) was not honoured", took)
				}
				if rec.Code != tt.status {
					fail(t, rec, "status %d, want %d", rec.Code, tt.status)
				}
			}
			body := decode(t, rec)
			if body["error"] != tt.code || body["error_description"] == "" {
				fail(t, rec, "error %v, want %s", body["error"], tt.code)
			}
			if got := rec.Header().Get("Retry-After"); tt.retryAfter != "" && got != tt.retryAfter {
				fail(t, rec, "Retry-After %q, want %q", got, tt.retryAfter)
			}
			if tt.status == 503 && rec.Header().Get("Retry-After") == "" {
				fail(t, rec, "503 without Retry-After")
			}
			if rec.Header().Get("Cache-Control") != "no-store" {
				fail(t, rec, "Cache-Control %q", rec.Header().Get("Cache-Control"))
			}
			if tt.idpCalls > 0 {
				if got := e.idp.callsFor(tt.form.Get("subject_token")); got < tt.idpCalls {
					t.Fatalf("provider called %d times for %q, want %d: a failure was cached", got, tt.form.Get("subject_token"), tt.idpCalls)
				}
			}
			if strings.Contains(rec.Body.String(), tt.form.Get("subject_token")) && len(tt.form.Get("subject_token")) > 8 {
				fail(t, rec, "the subject token leaked into the response")
			}
		})
	}
	if n := e.idp.callsFor("other-host:Bearer redirect-other"); n != 0 {
		t.Fatalf("the bearer token was sent to another host %d times", n)
	}
}

func TestExchangeFormRequirements(t *testing.T) {
	e := newEnv(t)
	req := httptest.NewRequest("POST", "/oauth2/token", strings.NewReader(`{"grant_type":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.srv.ServeToken(rec, req)
	if rec.Code != 400 || decode(t, rec)["error"] != "invalid_request" {
		fail(t, rec, "JSON body accepted")
	}
	rec = httptest.NewRecorder()
	e.srv.ServeToken(rec, httptest.NewRequest("GET", "/oauth2/token", nil))
	if rec.Code != 405 || decode(t, rec)["error"] != "invalid_request" {
		fail(t, rec, "GET accepted")
	}
}

func TestExchangeSuccess(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, client, subject, scope string
		basic                        [2]string
		wantRefresh, wantID          bool
		wantProfile                  string
	}{
		{name: "email match, default scope", client: "web", subject: "alice", wantRefresh: true, wantID: true, wantProfile: "Practitioner/alice"},
		{name: "use_subject match", client: "sub-client", subject: "alice-sub", wantRefresh: true, wantID: true, wantProfile: "Practitioner/alice"},
		{name: "JWT userinfo body", client: "web", subject: "jwt", wantRefresh: true, wantID: true, wantProfile: "Practitioner/alice"},
		{name: "same-host redirect followed", client: "web", subject: "redirect-same", wantRefresh: true, wantID: true, wantProfile: "Practitioner/alice"},
		{name: "no offline scope, no refresh token", client: "web", subject: "alice", scope: "openid", wantID: true, wantProfile: "Practitioner/alice"},
		{name: "offline_access without openid", client: "web", subject: "alice", scope: "offline_access", wantRefresh: true, wantProfile: "Practitioner/alice"},
		{name: "confidential client with basic auth", client: "", subject: "alice", basic: [2]string{"secret-client", "s3cret"}, wantRefresh: true, wantID: true, wantProfile: "Practitioner/alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			form := exchangeForm(tt.client, tt.subject)
			if tt.client == "" {
				form.Del("client_id")
			}
			if tt.scope != "" {
				form.Set("scope", tt.scope)
			}
			rec := e.post(e.srv.ServeToken, form, tt.basic[0], tt.basic[1])
			if rec.Code != 200 {
				fail(t, rec, "exchange failed")
			}
			if rec.Header().Get("Cache-Control") != "no-store" {
				fail(t, rec, "missing Cache-Control: no-store")
			}
			body := decode(t, rec)
			if body["token_type"] != "Bearer" || body["issued_token_type"] != tokenTypeAccess || body["expires_in"].(float64) != 3600 {
				fail(t, rec, "token response fields")
			}
			if _, ok := body["refresh_token"]; ok != tt.wantRefresh {
				fail(t, rec, "refresh_token present=%v, want %v", ok, tt.wantRefresh)
			}
			if _, ok := body["id_token"]; ok != tt.wantID {
				fail(t, rec, "id_token present=%v, want %v", ok, tt.wantID)
			}
			if p := body["profile"].(map[string]any); p["reference"] != tt.wantProfile {
				fail(t, rec, "profile %v", p)
			}
			if p := body["project"].(map[string]any); p["reference"] != "Project/p1" {
				fail(t, rec, "project %v", p)
			}
			claims, err := e.tok.Verify(context.Background(), body["access_token"].(string), tokens.KindAccess)
			if err != nil {
				t.Fatal(err)
			}
			login, err := store.Get[store.Login](context.Background(), e.st, claims.LoginID)
			if err != nil {
				t.Fatalf("login %s not persisted: %v", claims.LoginID, err)
			}
			if login.AuthMethod != "exchange" || claims.Profile != tt.wantProfile || claims.Audience != claims.ClientID {
				t.Fatalf("login %+v claims %+v", login, claims)
			}
		})
	}
}

func TestUserinfoCachedAcrossExchanges(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		if rec := e.exchange("web", "alice"); rec.Code != 200 {
			fail(t, rec, "exchange")
		}
	}
	if n := e.idp.callsFor("alice"); n != 1 {
		t.Fatalf("provider called %d times for three exchanges of one token", n)
	}
	// The cache is per client: the same token through another client asks
	// the provider again.
	if rec := e.exchange("sub-client", "alice"); rec.Code != 200 {
		fail(t, rec, "exchange through the use-subject client")
	}
	if n := e.idp.callsFor("alice"); n != 2 {
		t.Fatalf("provider called %d times; the second client must not share the first one's cache entry", n)
	}
}

func TestRefreshRotationAndReuse(t *testing.T) {
	e := newEnv(t)
	first := decode(t, e.exchange("web", "alice"))
	refresh := func(tok string) *httptest.ResponseRecorder {
		return e.post(e.srv.ServeToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok}, "client_id": {"web"}}, "", "")
	}
	rec := refresh(first["refresh_token"].(string))
	if rec.Code != 200 {
		fail(t, rec, "first refresh")
	}
	second := decode(t, rec)
	if second["refresh_token"] == first["refresh_token"] || second["refresh_token"] == nil {
		t.Fatal("refresh did not rotate the refresh token")
	}
	if second["issued_token_type"] != nil {
		t.Fatal("issued_token_type belongs to token exchange only")
	}
	// The new access token works.
	if _, aerr := e.authenticate(second["access_token"].(string)); aerr != nil {
		t.Fatalf("refreshed access token: %v", aerr)
	}
	// Reusing the first refresh token revokes the whole sign-in.
	if rec := refresh(first["refresh_token"].(string)); rec.Code != 400 || decode(t, rec)["error"] != "invalid_grant" {
		fail(t, rec, "reuse of a rotated refresh token")
	}
	if rec := refresh(second["refresh_token"].(string)); rec.Code != 400 {
		fail(t, rec, "the current refresh token survived a detected reuse")
	}
	if _, aerr := e.authenticate(second["access_token"].(string)); aerr == nil || aerr.Reason != "revoked" {
		t.Fatalf("access token after reuse detection: %v", aerr)
	}
	// An access token is not a refresh token.
	if rec := refresh(first["access_token"].(string)); rec.Code != 400 || decode(t, rec)["error"] != "invalid_grant" {
		fail(t, rec, "access token accepted as refresh token")
	}
}

func (e *env) authenticate(token string) (*Identity, *AuthError) {
	req := httptest.NewRequest("GET", "/fhir/R4/Patient/1", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	return e.srv.Authenticate(context.Background(), req)
}

func TestRevokeTakesEffectOnNextRequest(t *testing.T) {
	e := newEnv(t)
	tok := decode(t, e.exchange("web", "alice"))
	access := tok["access_token"].(string)
	id, aerr := e.authenticate(access)
	if aerr != nil || id.ProjectID != "p1" || id.Profile != "Practitioner/alice" || id.ClientID != "web" {
		t.Fatalf("identity %+v, %v", id, aerr)
	}
	rec := e.post(e.srv.ServeRevoke, url.Values{"token": {access}}, "", "")
	if rec.Code != 200 {
		fail(t, rec, "revoke")
	}
	if _, aerr := e.authenticate(access); aerr == nil || aerr.Reason != "revoked" {
		t.Fatalf("revoked token still authenticates: %v", aerr)
	}
	// Unknown tokens are 200 too (RFC 7009 §2.2).
	if rec := e.post(e.srv.ServeRevoke, url.Values{"token": {"garbage"}}, "", ""); rec.Code != 200 {
		fail(t, rec, "revoking garbage")
	}
	if rec := e.post(e.srv.ServeRevoke, url.Values{}, "", ""); rec.Code != 400 {
		fail(t, rec, "revoke without token")
	}
}

func TestIntrospection(t *testing.T) {
	e := newEnv(t)
	tok := decode(t, e.exchange("web", "alice"))
	access := tok["access_token"].(string)
	tests := []struct {
		name       string
		form       url.Values
		status     int
		wantActive bool
	}{
		{"own token", url.Values{"token": {access}, "client_id": {"web"}}, 200, true},
		{"own refresh token", url.Values{"token": {tok["refresh_token"].(string)}, "client_id": {"web"}}, 200, true},
		{"other audience", url.Values{"token": {access}, "client_id": {"sub-client"}}, 200, false},
		{"garbage", url.Values{"token": {"x.y.z"}, "client_id": {"web"}}, 200, false},
		{"no client", url.Values{"token": {access}}, 401, false},
		{"unknown client", url.Values{"token": {access}, "client_id": {"nope"}}, 401, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := e.post(e.srv.ServeIntrospect, tt.form, "", "")
			if rec.Code != tt.status {
				fail(t, rec, "status")
			}
			if tt.status == 200 {
				body := decode(t, rec)
				if body["active"] != tt.wantActive {
					fail(t, rec, "active %v", body["active"])
				}
				if tt.wantActive && (body["sub"] == "" || body["client_id"] != "web") {
					fail(t, rec, "introspection fields")
				}
			}
		})
	}
}

func TestAuthenticateRejects(t *testing.T) {
	e := newEnv(t)
	tok := decode(t, e.exchange("web", "alice"))
	tests := []struct {
		name, header, reason string
	}{
		{"missing", "", "missing"},
		{"basic scheme", "Basic dXNlcjpwYXNz", "malformed_header"},
		{"empty bearer", "Bearer ", "malformed_header"},
		{"garbage", "Bearer not-a-jwt", "malformed"},
		{"refresh token as access", "Bearer " + tok["refresh_token"].(string), "type"},
		{"id token as access", "Bearer " + tok["id_token"].(string), "type"},
		{"oversized", "Bearer " + strings.Repeat("a", 9000), "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/fhir/R4/Patient", nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			_, aerr := e.srv.Authenticate(context.Background(), req)
			if aerr == nil || aerr.Reason != tt.reason {
				t.Fatalf("got %+v, want reason %s", aerr, tt.reason)
			}
			rec := httptest.NewRecorder()
			WriteAuthError(rec, aerr)
			if rec.Code != 401 || !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), `Bearer realm="fhirgate"`) {
				fail(t, rec, "challenge")
			}
			if tt.reason == "missing" && strings.Contains(rec.Header().Get("WWW-Authenticate"), "error=") {
				fail(t, rec, "no error code is sent when no token was")
			}
			if !strings.Contains(rec.Body.String(), `"OperationOutcome"`) {
				fail(t, rec, "body is not an OperationOutcome")
			}
		})
	}
}

func TestMetadataAndJWKS(t *testing.T) {
	e := newEnv(t)
	rec := httptest.NewRecorder()
	e.srv.ServeMetadata(rec, httptest.NewRequest("GET", "/.well-known/openid-configuration", nil))
	body := decode(t, rec)
	if body["issuer"] != testIssuer || body["token_endpoint"] != testIssuer+"/oauth2/token" || body["jwks_uri"] != testIssuer+"/.well-known/jwks.json" {
		fail(t, rec, "metadata")
	}
	rec = httptest.NewRecorder()
	e.srv.ServeJWKS(rec, httptest.NewRequest("GET", "/.well-known/jwks.json", nil))
	keys := decode(t, rec)["keys"].([]any)
	if len(keys) != 1 || keys[0].(map[string]any)["kid"] != e.tok.SigningKeyID() || keys[0].(map[string]any)["d"] != nil {
		fail(t, rec, "jwks")
	}
	rec = httptest.NewRecorder()
	e.srv.ServeJWKS(rec, httptest.NewRequest("POST", "/.well-known/jwks.json", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		fail(t, rec, "POST to JWKS")
	}
}

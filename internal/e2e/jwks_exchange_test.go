package e2e

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/userinfo/idptest"
)

// TestExchangeVerifiesJWTsByKeySet is issue 26 items 7 and 8 through the
// built Caddy: a client declared with idp_jwks_uri, idp_issuer and idp_audience
// exchanges signed access and ID tokens without calling userinfo, keeps
// working on its cached keys while the provider is down, and refuses an
// email the provider does not say is verified.
func TestExchangeVerifiesJWTsByKeySet(t *testing.T) {
	key, err := idptest.NewKey("RS256", "e2e-1")
	if err != nil {
		t.Fatal(err)
	}
	p := idptest.NewProvider(key)
	idp := httptest.NewServer(p)
	t.Cleanup(idp.Close)
	const issuer, audience = "https://tenant.idp.test/", "https://fhir.e2e.test"
	block := "\t\t\tclient alpha-jwt {\n" +
		"\t\t\t\tuserinfo_url " + idp.URL + "/userinfo\n" +
		"\t\t\t\tidp_jwks_uri " + idp.URL + "/jwks.json\n" +
		"\t\t\t\tidp_issuer " + issuer + "\n" +
		"\t\t\t\tidp_audience " + audience + " spa-client\n" +
		"\t\t\t}\n"
	tmpl := strings.Replace(stackCaddyfile, "\t\t\tclient alpha-sub {\n", block+"\t\t\tclient alpha-sub {\n", 1)
	if tmpl == stackCaddyfile {
		t.Fatal("the stack template changed: no alpha-sub client to insert before")
	}
	s := startStackWith(t, tmpl, "")

	claims := func(edits map[string]any) map[string]any {
		now := time.Now().Unix()
		c := map[string]any{"iss": issuer, "aud": audience, "sub": "sub-alice", "iat": now, "exp": now + 300,
			"email": "alice@example.com", "email_verified": true}
		return idptest.Edit(c, edits)
	}
	exchange := func(tok, tokType string) response {
		form := url.Values{
			"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "client_id": {"alpha-jwt"},
			"subject_token": {tok}, "subject_token_type": {"urn:ietf:params:oauth:token-type:" + tokType},
		}
		return do(t, "POST", s.gateway+"/oauth2/token", "application/x-www-form-urlencoded", form.Encode())
	}
	tests := []struct {
		name, tokType string
		token         string
		status        int
		errCode       string
	}{
		{name: "signed access token", tokType: "access_token", token: key.Sign(claims(map[string]any{"jti": "a"})), status: 200},
		{name: "ID token", tokType: "id_token", token: key.Sign(claims(map[string]any{"aud": "spa-client"})), status: 200},
		{name: "HS256 keyed with the public key", tokType: "access_token", token: idptest.HS256(key.PublicDER(), "e2e-1", claims(nil)), status: 400, errCode: "invalid_grant"},
		{name: "wrong issuer", tokType: "access_token", token: key.Sign(claims(map[string]any{"iss": "https://other/"})), status: 400, errCode: "invalid_grant"},
		{name: "ID token without email_verified", tokType: "id_token", token: key.Sign(claims(map[string]any{"email_verified": nil})), status: 400, errCode: "invalid_grant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := exchange(tt.token, tt.tokType)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.errCode != "" && r.json(t)["error"] != tt.errCode {
				t.Fatalf("error %s, want %s", r.body, tt.errCode)
			}
			if tt.status == 200 {
				// The token works at the gate.
				me := do(t, "GET", s.gateway+"/fhir/R4/Patient/jwt", "", "", "Authorization", "Bearer "+r.json(t)["access_token"].(string))
				if me.status != 200 {
					t.Fatalf("the exchanged token was refused: %d %s", me.status, me.body)
				}
			}
		})
	}
	if n := p.UserinfoCalls.Load(); n != 0 {
		t.Fatalf("%d userinfo calls for signed tokens carrying their claims, want 0", n)
	}

	t.Run("provider down, keys cached", func(t *testing.T) {
		p.Down.Store(true)
		defer p.Down.Store(false)
		if r := exchange(key.Sign(claims(map[string]any{"jti": "down"})), "access_token"); r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	})
}

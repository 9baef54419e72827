package oauth

import (
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/userinfo"
	"github.com/fhirgate/fhirgate/internal/userinfo/idptest"
)

const (
	jwtIssuer   = "https://tenant.idp.example.test/"
	jwtAudience = "https://fhir.example.test"
)

// jwksEnv is env plus a provider on 127.0.0.1 that publishes a key set and
// answers userinfo, and clients that verify its JWTs.
type jwksEnv struct {
	*env
	key *idptest.Key
	p   *idptest.Provider
	url string
}

func newJWKSEnv(t *testing.T) *jwksEnv {
	t.Helper()
	key, err := idptest.NewKey("ES256", "k1")
	if err != nil {
		t.Fatal(err)
	}
	p := idptest.NewProvider(key)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	j := &jwksEnv{env: newEnv(t), key: key, p: p, url: srv.URL}
	j.jwtClient("jwt-web", func(*store.IdentityProvider) {})
	j.jwtClient("jwt-sub", func(idp *store.IdentityProvider) { idp.UseSubject = true })
	j.jwtClient("jwt-only", func(idp *store.IdentityProvider) { idp.UserInfoURL = "" })
	j.jwtClient("jwt-lax", func(idp *store.IdentityProvider) { idp.AllowUnverifiedEmail = true })
	return j
}

func (j *jwksEnv) jwtClient(id string, edit func(*store.IdentityProvider)) {
	idp := &store.IdentityProvider{
		UserInfoURL: j.url + "/userinfo", JWKSURI: j.url + "/jwks.json",
		Issuer: jwtIssuer, Audience: []string{jwtAudience},
	}
	edit(idp)
	c := &store.ClientApplication{Name: id, IdentityProvider: idp}
	c.Meta.Project = "p1"
	j.put(c, id)
}

func (j *jwksEnv) token(edits map[string]any) string {
	now := time.Now().Unix()
	c := map[string]any{
		"iss": jwtIssuer, "aud": jwtAudience, "sub": "idp|alice", "exp": now + 300, "iat": now,
		"email": "alice@example.com", "email_verified": true,
	}
	return j.key.Sign(idptest.Edit(c, edits))
}

func TestExchangeVerifiesJWTSubjectTokens(t *testing.T) {
	j := newJWKSEnv(t)
	idForm := func(client, tok string) url.Values {
		f := exchangeForm(client, tok)
		f.Set("subject_token_type", tokenTypeID)
		return f
	}
	tests := []struct {
		name         string
		form         func() url.Values
		before       func()
		status       int
		code         string // "" = success
		wantUserinfo int64
	}{
		{name: "verified JWT with a verified email", form: func() url.Values { return exchangeForm("jwt-web", j.token(nil)) }, status: 200},
		{name: "verified JWT matched by sub", form: func() url.Values {
			return exchangeForm("jwt-sub", j.token(map[string]any{"email": nil, "email_verified": nil}))
		}, status: 200},
		{name: "ID token", form: func() url.Values {
			return idForm("jwt-web", j.token(map[string]any{"aud": []string{"spa-client-id", jwtAudience}}))
		}, status: 200},
		{name: "client with keys only", form: func() url.Values { return exchangeForm("jwt-only", j.token(nil)) }, status: 200},
		{name: "email without email_verified, provider's userinfo does not know the token", form: func() url.Values {
			return exchangeForm("jwt-web", j.token(map[string]any{"email_verified": nil}))
		}, status: 400, code: "invalid_grant", wantUserinfo: 1},
		{name: "email without email_verified, provider's userinfo verifies it", form: func() url.Values {
			tok := j.token(map[string]any{"email_verified": nil, "jti": "x1"})
			j.p.SetUserinfo(tok, `{"sub":"idp|alice","email":"alice@example.com","email_verified":true}`)
			return exchangeForm("jwt-web", tok)
		}, status: 200, wantUserinfo: 1},
		{name: "ID token without email_verified", form: func() url.Values {
			return idForm("jwt-web", j.token(map[string]any{"email_verified": nil}))
		}, status: 400, code: "invalid_grant"},
		{name: "keys-only client, email without email_verified", form: func() url.Values {
			return exchangeForm("jwt-only", j.token(map[string]any{"email_verified": nil}))
		}, status: 400, code: "invalid_grant"},
		{name: "allow_unverified_email keeps the old behaviour", form: func() url.Values {
			return exchangeForm("jwt-lax", j.token(map[string]any{"email_verified": nil}))
		}, status: 200},
		{name: "email_verified false", form: func() url.Values {
			return exchangeForm("jwt-web", j.token(map[string]any{"email_verified": false}))
		}, status: 400, code: "invalid_grant"},
		{name: "expired", form: func() url.Values {
			return exchangeForm("jwt-web", j.token(map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}))
		}, status: 400, code: "invalid_grant"},
		{name: "wrong audience", form: func() url.Values { return exchangeForm("jwt-web", j.token(map[string]any{"aud": "x"})) }, status: 400, code: "invalid_grant"},
		{name: "alg none", form: func() url.Values {
			return exchangeForm("jwt-web", idptest.Unsigned("k1", map[string]any{"iss": jwtIssuer, "aud": jwtAudience, "sub": "s", "exp": time.Now().Unix() + 60}))
		}, status: 400, code: "invalid_grant"},
		{name: "opaque token on a keys-only client", form: func() url.Values { return exchangeForm("jwt-only", "opaque") }, status: 400, code: "invalid_grant"},
		{name: "opaque token goes to userinfo", form: func() url.Values {
			j.p.SetUserinfo("opaque-alice", `{"email":"alice@example.com","email_verified":true}`)
			return exchangeForm("jwt-web", "opaque-alice")
		}, status: 200, wantUserinfo: 1},
		{name: "key set unreachable and not cached", before: func() { j.p.Down.Store(true) }, form: func() url.Values {
			return exchangeForm("jwt-web", j.token(nil))
		}, status: 503, code: "temporarily_unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each case gets its own userinfo client, so the key set is
			// fetched afresh and nothing is cached between cases.
			j.srv.o.UserInfo = newUserinfoClient()
			j.p.Down.Store(false)
			if tt.before != nil {
				tt.before()
			}
			before := j.p.UserinfoCalls.Load()
			rec := j.post(j.srv.ServeToken, tt.form(), "", "")
			if rec.Code != tt.status {
				fail(t, rec, "status %d, want %d", rec.Code, tt.status)
			}
			body := decode(t, rec)
			if tt.code != "" && body["error"] != tt.code {
				fail(t, rec, "error %v, want %s", body["error"], tt.code)
			}
			if tt.status == 503 && rec.Header().Get("Retry-After") == "" {
				fail(t, rec, "503 without Retry-After")
			}
			if tt.code == "" && body["access_token"] == nil {
				fail(t, rec, "no access token")
			}
			if got := j.p.UserinfoCalls.Load() - before; got != tt.wantUserinfo {
				t.Fatalf("%d userinfo calls, want %d", got, tt.wantUserinfo)
			}
		})
	}
}

// TestExchangeCountsNoUserinfoCallsForVerifiedJWTs is the point of the
// feature: a flood of distinct signed tokens costs the provider one JWKS
// fetch and no userinfo call.
func TestExchangeCountsNoUserinfoCallsForVerifiedJWTs(t *testing.T) {
	j := newJWKSEnv(t)
	const n = 25
	for i := range n {
		rec := j.exchange("jwt-web", j.token(map[string]any{"jti": i}))
		if rec.Code != 200 {
			fail(t, rec, "exchange %d", i)
		}
	}
	if u, k := j.p.UserinfoCalls.Load(), j.p.JWKSCalls.Load(); u != 0 || k != 1 {
		t.Fatalf("%d userinfo calls and %d JWKS fetches for %d exchanges, want 0 and 1", u, k, n)
	}
	// The same run through userinfo: one call per distinct token.
	for i := range n {
		tok := "opaque-" + string(rune('a'+i))
		j.p.SetUserinfo(tok, `{"email":"alice@example.com","email_verified":true}`)
		if rec := j.exchange("jwt-web", tok); rec.Code != 200 {
			fail(t, rec, "opaque exchange %d", i)
		}
	}
	if u := j.p.UserinfoCalls.Load(); u != n {
		t.Fatalf("%d userinfo calls for %d opaque tokens, want %d", u, n, n)
	}
}

func TestExchangeKeepsWorkingOnACachedKeySetDuringAnOutage(t *testing.T) {
	j := newJWKSEnv(t)
	if rec := j.exchange("jwt-web", j.token(map[string]any{"jti": "warm"})); rec.Code != 200 {
		fail(t, rec, "warm-up exchange")
	}
	j.p.Down.Store(true)
	if rec := j.exchange("jwt-web", j.token(map[string]any{"jti": "during"})); rec.Code != 200 {
		fail(t, rec, "exchange during the outage, key set cached")
	}
}

func newUserinfoClient() *userinfo.Client {
	return userinfo.New(userinfo.Options{DefaultTimeout: 2 * time.Second})
}

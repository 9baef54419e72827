package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
	"github.com/fhirgate/fhirgate/internal/tokens"
)

// machineKey is a client's signing key and its public JWK set.
type machineKey struct {
	priv jwk.Key
	set  json.RawMessage
}

func newMachineKey(t *testing.T, kid string) machineKey {
	t.Helper()
	raw, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := jwk.Import(raw)
	if err != nil {
		t.Fatal(err)
	}
	_ = priv.Set(jwk.KeyIDKey, kid)
	pub, err := priv.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	_ = set.AddKey(pub)
	body, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return machineKey{priv: priv, set: body}
}

// assertion signs a client assertion; adjust changes the claims first.
func (k machineKey) assertion(t *testing.T, client string, adjust func(b *jwt.Builder)) string {
	t.Helper()
	b := jwt.NewBuilder().Issuer(client).Subject(client).Audience([]string{testIssuer + "/oauth2/token"}).
		JwtID(randomSecret()).IssuedAt(time.Now()).Expiration(time.Now().Add(2 * time.Minute))
	if adjust != nil {
		adjust(b)
	}
	tok, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.ES256(), k.priv))
	if err != nil {
		t.Fatal(err)
	}
	return string(signed)
}

// machine stores a client that signs in as itself and its membership.
func (e *env) machine(id string, edit func(c *store.ClientApplication), admin bool) {
	e.t.Helper()
	c := &store.ClientApplication{Name: id}
	c.Meta.Project = "p1"
	edit(c)
	e.put(c, id)
	ref := "ClientApplication/" + id
	m := &store.ProjectMembership{
		Project: store.Reference{Reference: "Project/p1"},
		User:    store.Reference{Reference: ref}, Profile: &store.Reference{Reference: ref}, Admin: admin,
	}
	if err := e.st.Create(context.Background(), m, store.PutOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func assertionForm(client, assertion string) url.Values {
	return url.Values{
		"grant_type":            {grantClientCredentials},
		"client_id":             {client},
		"client_assertion_type": {clientAssertionTypeJWT},
		"client_assertion":      {assertion},
	}
}

// TestClientCredentialsTable covers how the token endpoint authenticates
// machines: secrets (current and retiring, Basic and form), client
// assertions (inline keys and jwks_uri) and what it refuses.
func TestClientCredentialsTable(t *testing.T) {
	e := newEnv(t)
	key, other := newMachineKey(t, "k1"), newMachineKey(t, "k1")
	var jwksCalls atomic.Int32
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		jwksCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(key.set)
	}))
	t.Cleanup(jwks.Close)

	e.machine("ci", func(c *store.ClientApplication) { c.Secret, c.RetiringSecret = "new-secret-value", "old-secret-value" }, true)
	e.machine("keyed", func(c *store.ClientApplication) { c.JWKS = key.set }, false)
	e.machine("keyed-uri", func(c *store.ClientApplication) { c.JWKSURI = jwks.URL + "/jwks.json" }, false)
	octSecret := []byte("a-symmetric-key-published-in-the-jwks!!")
	octKey, err := jwk.Import(octSecret)
	if err != nil {
		t.Fatal(err)
	}
	octSet := jwk.NewSet()
	_ = octSet.AddKey(octKey)
	octJSON, _ := json.Marshal(octSet)
	e.machine("keyed-oct", func(c *store.ClientApplication) { c.JWKS = octJSON }, false)
	hs256 := func() string {
		tok, _ := jwt.NewBuilder().Issuer("keyed-oct").Subject("keyed-oct").Audience([]string{testIssuer}).
			JwtID("hs").Expiration(time.Now().Add(time.Minute)).Build()
		signed, err := jwt.Sign(tok, jwt.WithKey(jwa.HS256(), octSecret))
		if err != nil {
			t.Fatal(err)
		}
		return string(signed)
	}()
	e.machine("off", func(c *store.ClientApplication) { c.Secret, c.Status = "off-secret-value", "off" }, false)
	lone := &store.ClientApplication{Name: "lone", Secret: "lone-secret-value"}
	lone.Meta.Project = "p1"
	e.put(lone, "lone") // a secret but no membership

	ccForm := func(id, secret string) url.Values {
		return url.Values{"grant_type": {grantClientCredentials}, "client_id": {id}, "client_secret": {secret}}
	}
	replayed := key.assertion(t, "keyed", nil)
	cases := []struct {
		name        string
		form        url.Values
		user, pass  string
		status      int
		code        string
		description string
	}{
		{name: "secret in Basic", form: url.Values{"grant_type": {grantClientCredentials}}, user: "ci", pass: "new-secret-value", status: 200},
		{name: "secret in the form", form: ccForm("ci", "new-secret-value"), status: 200},
		{name: "Basic and the form together, as MedplumClient sends them", form: ccForm("ci", "new-secret-value"), user: "ci", pass: "new-secret-value", status: 200},
		{name: "retiring secret", form: ccForm("ci", "old-secret-value"), status: 200},
		{name: "wrong secret", form: ccForm("ci", "wrong-secret"), status: 401, code: errInvalidClient},
		{name: "unknown client", form: ccForm("nobody", "new-secret-value"), status: 401, code: errInvalidClient},
		{name: "no secret sent", form: ccForm("ci", ""), status: 401, code: errInvalidClient},
		{name: "inactive client", form: ccForm("off", "off-secret-value"), status: 401, code: errInvalidClient, description: "not active"},
		{name: "client without a secret", form: ccForm("web", "anything"), status: 401, code: errInvalidClient, description: "has no secret"},
		{name: "client without a membership", form: ccForm("lone", "lone-secret-value"), status: 400, code: errUnauthorizedClient, description: "membership"},
		{name: "inline key", form: assertionForm("keyed", key.assertion(t, "keyed", nil)), status: 200},
		{name: "key from jwks_uri", form: assertionForm("keyed-uri", key.assertion(t, "keyed-uri", nil)), status: 200},
		{name: "client id taken from the assertion", form: func() url.Values {
			f := assertionForm("keyed", key.assertion(t, "keyed", nil))
			f.Del("client_id")
			return f
		}(), status: 200},
		{name: "first use of an assertion", form: assertionForm("keyed", replayed), status: 200},
		{name: "replayed jti", form: assertionForm("keyed", replayed), status: 401, code: errInvalidClient, description: "already used"},
		{name: "wrong key", form: assertionForm("keyed", other.assertion(t, "keyed", nil)), status: 401, code: errInvalidClient, description: "does not verify"},
		{name: "wrong key at jwks_uri", form: assertionForm("keyed-uri", other.assertion(t, "keyed-uri", nil)), status: 401, code: errInvalidClient},
		{name: "expired assertion", form: assertionForm("keyed", key.assertion(t, "keyed", func(b *jwt.Builder) {
			b.IssuedAt(time.Now().Add(-10 * time.Minute)).Expiration(time.Now().Add(-5 * time.Minute))
		})), status: 401, code: errInvalidClient, description: "expired"},
		{name: "assertion living too long", form: assertionForm("keyed", key.assertion(t, "keyed", func(b *jwt.Builder) {
			b.Expiration(time.Now().Add(time.Hour))
		})), status: 401, code: errInvalidClient, description: "too long"},
		{name: "assertion without exp", form: assertionForm("keyed", func() string {
			tok, _ := jwt.NewBuilder().Issuer("keyed").Subject("keyed").Audience([]string{testIssuer}).JwtID("no-exp").Build()
			signed, err := jwt.Sign(tok, jwt.WithKey(jwa.ES256(), key.priv))
			if err != nil {
				t.Fatal(err)
			}
			return string(signed)
		}()), status: 401, code: errInvalidClient, description: "no exp"},
		{name: "wrong aud", form: assertionForm("keyed", key.assertion(t, "keyed", func(b *jwt.Builder) {
			b.Audience([]string{"https://elsewhere.example/oauth2/token"})
		})), status: 401, code: errInvalidClient, description: "aud"},
		{name: "aud is the issuer", form: assertionForm("keyed", key.assertion(t, "keyed", func(b *jwt.Builder) {
			b.Audience([]string{testIssuer})
		})), status: 200},
		{name: "assertion for another client", form: assertionForm("keyed", key.assertion(t, "keyed-uri", nil)), status: 401, code: errInvalidClient},
		{name: "assertion without jti", form: assertionForm("keyed", key.assertion(t, "keyed", func(b *jwt.Builder) { b.JwtID("") })), status: 401, code: errInvalidClient, description: "jti"},
		{name: "HS256 with a symmetric key of the jwks", form: assertionForm("keyed-oct", hs256), status: 401, code: errInvalidClient, description: "does not verify"},
		{name: "alg none", form: assertionForm("keyed", unsignedAssertion("keyed")), status: 401, code: errInvalidClient, description: "does not verify"},
		{name: "client without keys", form: assertionForm("ci", key.assertion(t, "ci", nil)), status: 401, code: errInvalidClient, description: "no keys"},
		{name: "wrong assertion type", form: func() url.Values {
			f := assertionForm("keyed", key.assertion(t, "keyed", nil))
			f.Set("client_assertion_type", "urn:example:other")
			return f
		}(), status: 400, code: errInvalidRequest},
		{name: "jwt-bearer grant", form: url.Values{"grant_type": {grantJWTBearer}, "assertion": {"x"}}, status: 400, code: errUnsupportedGrantType, description: "client_credentials"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := e.post(e.srv.ServeToken, tc.form, tc.user, tc.pass)
			if rec.Code != tc.status {
				fail(t, rec, "status %d, want %d", rec.Code, tc.status)
			}
			var body map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				fail(t, rec, "body is not JSON: %v", err)
			}
			if tc.status != 200 {
				if body["error"] != tc.code || !strings.Contains(body["error_description"].(string), tc.description) {
					fail(t, rec, "want error %s mentioning %q", tc.code, tc.description)
				}
				return
			}
			if body["refresh_token"] != nil {
				fail(t, rec, "a refresh token was issued for client_credentials")
			}
			client := tc.form.Get("client_id")
			if client == "" {
				client = tc.user
			}
			if client == "" {
				client = "keyed"
			}
			if prof, _ := body["profile"].(map[string]any); prof["reference"] != "ClientApplication/"+client {
				fail(t, rec, "profile %v, want ClientApplication/%s", body["profile"], client)
			}
			req := httptest.NewRequest("GET", "/fhir/R4/Patient", nil)
			req.Header.Set("Authorization", "Bearer "+body["access_token"].(string))
			id, aerr := e.srv.Authenticate(context.Background(), req)
			if aerr != nil {
				t.Fatalf("the issued token does not authenticate: %v", aerr)
			}
			if id.UserID != client || id.Profile != "ClientApplication/"+client || id.ProjectID != "p1" || id.Admin != (client == "ci") {
				t.Fatalf("identity %+v", id)
			}
		})
	}
	if jwksCalls.Load() == 0 {
		t.Fatal("the jwks_uri was never fetched")
	}
}

// ttlKV records the TTL each key was last written with.
type ttlKV struct {
	store.KV
	ttls map[string]time.Duration
	mu   sync.Mutex
}

type ttlTxn struct {
	store.Txn
	kv *ttlKV
}

func (k *ttlKV) Update(ctx context.Context, fn func(store.Txn) error) error {
	return k.KV.Update(ctx, func(tx store.Txn) error { return fn(ttlTxn{tx, k}) })
}

func (t ttlTxn) Set(key, value []byte, ttl time.Duration) error {
	t.kv.mu.Lock()
	t.kv.ttls[string(key)] = ttl
	t.kv.mu.Unlock()
	return t.Txn.Set(key, value, ttl)
}

// TestMachineLoginExpiresWithItsAccessToken: a sign-in by
// client_credentials is stored with the access token's lifetime, so a
// client that signs in on every command leaves nothing behind.
func TestMachineLoginExpiresWithItsAccessToken(t *testing.T) {
	rec := &ttlKV{ttls: map[string]time.Duration{}}
	e := newEnvWith(t, storetest.WrapKV(func(kv store.KV) store.KV { rec.KV = kv; return rec }))
	e.machine("ci", func(c *store.ClientApplication) { c.Secret, c.AccessTokenLifetime = "new-secret-value", "600s" }, false)
	resp := e.post(e.srv.ServeToken, url.Values{"grant_type": {grantClientCredentials}}, "ci", "new-secret-value")
	if resp.Code != 200 {
		fail(t, resp, "grant refused")
	}
	var body struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
		Scope       string `json:"scope"`
	}
	_ = json.Unmarshal(resp.Body.Bytes(), &body)
	if body.ExpiresIn != 600 || strings.Contains(body.Scope, "offline") {
		fail(t, resp, "expires_in %d scope %q", body.ExpiresIn, body.Scope)
	}
	claims, err := e.tok.Verify(context.Background(), body.AccessToken, tokens.KindAccess)
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	ttl, ok := rec.ttls["r/Login/"+claims.LoginID]
	rec.mu.Unlock()
	if !ok || ttl != 600*time.Second {
		t.Fatalf("the Login was written with TTL %s (written: %v), want the access token's 600s", ttl, ok)
	}
}

// unsignedAssertion is an assertion with alg "none".
func unsignedAssertion(client string) string {
	enc := base64.RawURLEncoding.EncodeToString
	claims := fmt.Sprintf(`{"iss":%q,"sub":%q,"aud":%q,"jti":"none-1","exp":%d}`, client, client, testIssuer, time.Now().Add(time.Minute).Unix())
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc([]byte(claims)) + "."
}

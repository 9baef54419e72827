package userinfo

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/userinfo/idptest"
)

const (
	testIssuer   = "https://idp.example.test/"
	testAudience = "https://api.example.test"
)

// jwksWorld is one provider on 127.0.0.1 with its keys, and a Client whose
// clock the test moves.
type jwksWorld struct {
	p     *idptest.Provider
	srv   *httptest.Server
	c     *Client
	clk   *clock
	keys  map[string]*idptest.Key
	check *JWTCheck
}

func newJWKSWorld(t *testing.T) *jwksWorld {
	t.Helper()
	w := &jwksWorld{keys: testKeys(t), clk: newClock()}
	w.p = idptest.NewProvider(w.keys["RS256"], w.keys["PS256"], w.keys["ES256"], w.keys["ES384"], w.keys["EdDSA"])
	w.srv = httptest.NewServer(w.p)
	t.Cleanup(w.srv.Close)
	w.c = New(Options{Now: w.clk.Now, DefaultTimeout: 5 * time.Second})
	w.check = &JWTCheck{JWKSURI: w.srv.URL + "/jwks.json", Issuer: testIssuer, Audience: []string{"other", testAudience}}
	return w
}

// testKeys are made once: RSA key generation is slow, and every case's
// provider publishes the same keys.
var testKeys = func() func(t *testing.T) map[string]*idptest.Key {
	var once sync.Once
	var keys map[string]*idptest.Key
	var err error
	return func(t *testing.T) map[string]*idptest.Key {
		t.Helper()
		once.Do(func() {
			keys = map[string]*idptest.Key{}
			for _, a := range []string{"RS256", "PS256", "ES256", "ES384", "EdDSA"} {
				var k *idptest.Key
				if k, err = idptest.NewKey(a, "kid-"+a); err != nil {
					return
				}
				keys[a] = k
			}
			keys["PS256"].NoAlg = true // a JWK without "alg": its type decides
		})
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
}()

// claims are a valid access token's, changed by edits.
func (w *jwksWorld) claims(edits map[string]any) map[string]any {
	now := w.clk.Now().Unix()
	c := map[string]any{
		"iss": testIssuer, "aud": testAudience, "sub": "auth0|ann",
		"iat": now, "exp": now + 600,
		"email": "ann@example.test", "email_verified": true,
	}
	return idptest.Edit(c, edits)
}

func (w *jwksWorld) identify(token string, idToken bool) (*Info, error) {
	return w.c.Identify(context.Background(), IdentifyRequest{
		Lookup:  LookupRequest{URL: w.srv.URL + "/userinfo", Token: token, CacheKey: "client"},
		JWT:     w.check,
		IDToken: idToken,
		Enough:  func(i *Info) bool { return i.Email != "" && i.EmailVerified != nil },
	})
}

func TestIdentifyVerifiesSubjectTokens(t *testing.T) {
	cases := []struct {
		name string
		// token mints the subject token (and may change the world first).
		token    func(w *jwksWorld) string
		idToken  bool
		wantKind Kind // "" = success
		// wantUserinfo is how many userinfo calls the case makes.
		wantUserinfo int64
		check        func(t *testing.T, w *jwksWorld, info *Info)
	}{
		{name: "RS256", token: func(w *jwksWorld) string { return w.keys["RS256"].Sign(w.claims(nil)) }},
		{name: "PS256 with a JWK that names no alg", token: func(w *jwksWorld) string { return w.keys["PS256"].Sign(w.claims(nil)) }},
		{name: "ES256", token: func(w *jwksWorld) string { return w.keys["ES256"].Sign(w.claims(nil)) }},
		{name: "ES384", token: func(w *jwksWorld) string { return w.keys["ES384"].Sign(w.claims(nil)) }},
		{name: "EdDSA", token: func(w *jwksWorld) string { return w.keys["EdDSA"].Sign(w.claims(nil)) }},
		{
			name: "aud as an array holding a configured audience",
			token: func(w *jwksWorld) string {
				return w.keys["ES256"].Sign(w.claims(map[string]any{"aud": []string{"x", testAudience}}))
			},
		},
		{
			name: "claims are the token's",
			token: func(w *jwksWorld) string {
				return w.keys["ES256"].Sign(w.claims(map[string]any{"email": "Ann@Example.test", "sub": "okta|00u1"}))
			},
			check: func(t *testing.T, _ *jwksWorld, info *Info) {
				if info.Sub != "okta|00u1" || info.Email != "Ann@Example.test" || info.EmailVerified == nil || !*info.EmailVerified {
					t.Fatalf("info %+v", info)
				}
			},
		},
		{
			name:     "alg none",
			token:    func(w *jwksWorld) string { return idptest.Unsigned("kid-RS256", w.claims(nil)) },
			wantKind: KindRejected,
		},
		{
			name: "HS256 keyed with the RSA public key",
			token: func(w *jwksWorld) string {
				return idptest.HS256(w.keys["RS256"].PublicDER(), "kid-RS256", w.claims(nil))
			},
			wantKind: KindRejected,
		},
		{
			name: "HS256 keyed with the published JWK",
			token: func(w *jwksWorld) string {
				return idptest.HS256(w.keys["RS256"].PublicJWK(), "kid-RS256", w.claims(nil))
			},
			wantKind: KindRejected,
		},
		{
			name: "RS256 token naming an EC key's kid",
			token: func(w *jwksWorld) string {
				k := w.keys["RS256"]
				return k.SignWithHeader(map[string]any{"alg": "RS256", "kid": "kid-ES256"}, w.claims(nil))
			},
			wantKind: KindRejected,
		},
		{
			name: "tampered payload",
			token: func(w *jwksWorld) string {
				good := w.keys["ES256"].Sign(w.claims(nil))
				other := w.keys["ES256"].Sign(w.claims(map[string]any{"email": "mallory@example.test"}))
				return good[:strings.Index(good, ".")] + other[strings.Index(other, "."):strings.LastIndex(other, ".")] + good[strings.LastIndex(good, "."):]
			},
			wantKind: KindRejected,
		},
		{name: "wrong aud", token: func(w *jwksWorld) string {
			return w.keys["ES256"].Sign(w.claims(map[string]any{"aud": "https://evil"}))
		}, wantKind: KindRejected},
		{name: "no aud", token: func(w *jwksWorld) string { return w.keys["ES256"].Sign(w.claims(map[string]any{"aud": nil})) }, wantKind: KindRejected},
		{name: "wrong iss", token: func(w *jwksWorld) string {
			return w.keys["ES256"].Sign(w.claims(map[string]any{"iss": "https://evil/"}))
		}, wantKind: KindRejected},
		{
			name: "expired past the skew",
			token: func(w *jwksWorld) string {
				return w.keys["ES256"].Sign(w.claims(map[string]any{"exp": w.clk.Now().Unix() - 31}))
			},
			wantKind: KindRejected,
		},
		{
			name: "expired within the skew",
			token: func(w *jwksWorld) string {
				return w.keys["ES256"].Sign(w.claims(map[string]any{"exp": w.clk.Now().Unix() - 20}))
			},
		},
		{
			name:     "no exp",
			token:    func(w *jwksWorld) string { return w.keys["ES256"].Sign(w.claims(map[string]any{"exp": nil})) },
			wantKind: KindRejected,
		},
		{
			name: "nbf in the future",
			token: func(w *jwksWorld) string {
				return w.keys["ES256"].Sign(w.claims(map[string]any{"nbf": w.clk.Now().Unix() + 120}))
			},
			wantKind: KindRejected,
		},
		{
			name: "unknown kid",
			token: func(w *jwksWorld) string {
				return w.keys["ES256"].SignWithHeader(map[string]any{"alg": "ES256", "kid": "nope"}, w.claims(nil))
			},
			wantKind: KindRejected,
		},
		{
			name: "no kid: every key of the alg is tried",
			token: func(w *jwksWorld) string {
				return w.keys["EdDSA"].SignWithHeader(map[string]any{"alg": "EdDSA"}, w.claims(nil))
			},
		},
		{
			name: "verified token without email_verified goes to userinfo",
			token: func(w *jwksWorld) string {
				return w.keys["ES256"].Sign(w.claims(map[string]any{"email_verified": nil}))
			},
			wantKind:     KindRejected, // the provider does not know the token: 401
			wantUserinfo: 1,
		},
		{
			name: "verified access token without email takes userinfo's answer",
			token: func(w *jwksWorld) string {
				tok := w.keys["RS256"].Sign(w.claims(map[string]any{"email": nil, "email_verified": nil}))
				w.p.SetUserinfo(tok, `{"sub":"auth0|ann","email":"ann@example.test","email_verified":true}`)
				return tok
			},
			wantUserinfo: 1,
			check: func(t *testing.T, _ *jwksWorld, info *Info) {
				if info.Email != "ann@example.test" {
					t.Fatalf("info %+v", info)
				}
			},
		},
		{
			name: "ID token without email_verified never goes to userinfo",
			token: func(w *jwksWorld) string {
				return w.keys["RS256"].Sign(w.claims(map[string]any{"email_verified": nil}))
			},
			idToken: true,
			check: func(t *testing.T, _ *jwksWorld, info *Info) {
				if info.Email != "ann@example.test" || info.EmailVerified != nil {
					t.Fatalf("info %+v", info)
				}
			},
		},
		{name: "opaque ID token", token: func(*jwksWorld) string { return "opaque-id-token" }, idToken: true, wantKind: KindRejected},
		{
			name: "opaque token goes to userinfo",
			token: func(w *jwksWorld) string {
				w.p.SetUserinfo("opaque-at", `{"sub":"x","email":"x@example.test","email_verified":true}`)
				return "opaque-at"
			},
			wantUserinfo: 1,
		},
		{
			name: "provider down with no cached JWKS",
			token: func(w *jwksWorld) string {
				w.p.Down.Store(true)
				return w.keys["ES256"].Sign(w.claims(nil))
			},
			wantKind: KindUnavailable,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newJWKSWorld(t)
			info, err := w.identify(tc.token(w), tc.idToken)
			if tc.wantKind != "" {
				wantKind(t, err, tc.wantKind)
			} else if err != nil {
				t.Fatalf("identify: %v", err)
			}
			if got := w.p.UserinfoCalls.Load(); got != tc.wantUserinfo {
				t.Fatalf("%d userinfo calls, want %d", got, tc.wantUserinfo)
			}
			if tc.check != nil {
				tc.check(t, w, info)
			}
		})
	}
}

func TestIdentifyJWKSCache(t *testing.T) {
	t.Run("cached set serves many tokens with one fetch and no userinfo", func(t *testing.T) {
		w := newJWKSWorld(t)
		for i := range 20 {
			tok := w.keys["ES256"].Sign(w.claims(map[string]any{"jti": i}))
			if _, err := w.identify(tok, false); err != nil {
				t.Fatal(err)
			}
		}
		if j, u := w.p.JWKSCalls.Load(), w.p.UserinfoCalls.Load(); j != 1 || u != 0 {
			t.Fatalf("%d JWKS fetches and %d userinfo calls, want 1 and 0", j, u)
		}
		if s := w.c.Stats(); s.Verified != 20 || s.JWKSFetches != 1 || s.Calls != 0 {
			t.Fatalf("stats %+v", s)
		}
	})

	t.Run("key rotation at the provider", func(t *testing.T) {
		w := newJWKSWorld(t)
		old := w.keys["ES256"]
		if _, err := w.identify(old.Sign(w.claims(nil)), false); err != nil {
			t.Fatal(err)
		}
		next, err := idptest.NewKey("ES256", "kid-next")
		if err != nil {
			t.Fatal(err)
		}
		w.p.SetKeys(next) // the old key is retired at once
		w.clk.Advance(DefaultJWKSMinRefetch)
		if _, err := w.identify(next.Sign(w.claims(nil)), false); err != nil {
			t.Fatalf("token of the new key: %v", err)
		}
		if got := w.p.JWKSCalls.Load(); got != 2 {
			t.Fatalf("%d JWKS fetches, want 2 (the new kid refetches)", got)
		}
		// The refetch replaced the set: the retired key verifies nothing.
		wantKind(t, second(w.identify(old.Sign(w.claims(nil)), false)), KindRejected)
	})

	t.Run("unknown kids refetch at most once per interval", func(t *testing.T) {
		w := newJWKSWorld(t)
		forged := func(kid string) string {
			return w.keys["ES256"].SignWithHeader(map[string]any{"alg": "ES256", "kid": kid}, w.claims(nil))
		}
		for i := range 5 {
			wantKind(t, second(w.identify(forged("made-up-"+string(rune('a'+i))), false)), KindRejected)
		}
		if got := w.p.JWKSCalls.Load(); got != 1 {
			t.Fatalf("%d JWKS fetches for 5 unknown kids in one interval, want 1", got)
		}
		w.clk.Advance(DefaultJWKSMinRefetch)
		wantKind(t, second(w.identify(forged("made-up-z"), false)), KindRejected)
		if got := w.p.JWKSCalls.Load(); got != 2 {
			t.Fatalf("%d JWKS fetches after the interval, want 2", got)
		}
		// A known kid is still served from the cache.
		if _, err := w.identify(w.keys["RS256"].Sign(w.claims(nil)), false); err != nil {
			t.Fatal(err)
		}
		if got := w.p.JWKSCalls.Load(); got != 2 {
			t.Fatalf("%d JWKS fetches, want still 2", got)
		}
	})

	t.Run("provider down with a cached JWKS", func(t *testing.T) {
		w := newJWKSWorld(t)
		if _, err := w.identify(w.keys["ES256"].Sign(w.claims(nil)), false); err != nil {
			t.Fatal(err)
		}
		w.p.Down.Store(true)
		// Past the refresh age the refetch fails, and the cached set still
		// verifies until its max age.
		w.clk.Advance(DefaultJWKSRefresh + time.Second)
		if _, err := w.identify(w.keys["ES256"].Sign(w.claims(nil)), false); err != nil {
			t.Fatalf("cached set during an outage: %v", err)
		}
		// A kid the cache lacks during the outage is an outage, not a forgery.
		k, _ := idptest.NewKey("ES256", "kid-rotated-in")
		wantKind(t, second(w.identify(k.Sign(w.claims(nil)), false)), KindUnavailable)
		w.clk.Advance(DefaultJWKSMaxAge)
		wantKind(t, second(w.identify(w.keys["ES256"].Sign(w.claims(nil)), false)), KindUnavailable)
		if got := w.p.UserinfoCalls.Load(); got != 0 {
			t.Fatalf("%d userinfo calls, want 0", got)
		}
		w.p.Down.Store(false)
		w.clk.Advance(DefaultJWKSMinRefetch)
		if _, err := w.identify(w.keys["ES256"].Sign(w.claims(nil)), false); err != nil {
			t.Fatalf("after the outage: %v", err)
		}
	})

	t.Run("failed fetches are not repeated within the interval", func(t *testing.T) {
		w := newJWKSWorld(t)
		w.p.Down.Store(true)
		for range 3 {
			wantKind(t, second(w.identify(w.keys["ES256"].Sign(w.claims(nil)), false)), KindUnavailable)
		}
		if got := w.p.JWKSCalls.Load(); got != 1 {
			t.Fatalf("%d JWKS fetches, want 1", got)
		}
	})
}

func second[T any](_ T, err error) error { return err }

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// bodyKind is what a refusal's body must be.
type bodyKind int

const (
	outcomeBody bodyKind = iota // a FHIR OperationOutcome (fhirgate's FHIR and bot routes)
	oauthBody                   // RFC 6749 error JSON (the OAuth endpoints)
	eitherBody                  // either (the legacy /auth/exchange answers both)
	caddyBody                   // Caddy's or net/http's own answer to malformed HTTP: any body
	backendBody                 // the FHIR backend's answer: the request was meant to reach it
	noBody                      // HEAD
)

// hostileCase is one malformed or hostile request and what must come back.
type hostileCase struct {
	name string
	req  rawRequest
	// want is the exact status; 0 accepts any 4xx.
	want int
	body bodyKind
	// invalidToken: a 401 carrying error="invalid_token" (RFC 6750).
	invalidToken bool
	// bug, when set, names a product bug this case exposes; it is skipped
	// so CI stays green until the bug is fixed.
	bug   string
	check func(t *testing.T, r rawResponse)
}

// signIn exchanges a subject token and returns the whole token response.
func (s *stack) signIn(t *testing.T, client, subject string) map[string]any {
	t.Helper()
	form := url.Values{
		"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"client_id":          {client},
		"subject_token":      {subject},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}
	r := do(t, "POST", s.gateway+"/oauth2/token", "application/x-www-form-urlencoded", form.Encode())
	if r.status != 200 {
		t.Fatalf("exchange for %s: %d %s", client, r.status, r.body)
	}
	return r.json(t)
}

// TestHostileRequests sends malformed and hostile requests to the real
// built Caddy: bad and huge headers, invalid UTF-8, JSON bombs, duplicate
// form keys, wrong methods, path tricks, $execute smuggled into other
// paths, 10 MB and slow bodies, and every JWT attack. Each must get the
// documented 4xx with an OperationOutcome or OAuth error body (Caddy's own
// answers to malformed HTTP excepted), none may get a 5xx, none may reach
// the backend unless it carries a valid token (and then with the identity
// headers), and the gateway must still serve afterwards.
func TestHostileRequests(t *testing.T) {
	s := startStack(t, "bot_timeout 2s")
	signedIn := s.signIn(t, "alpha-app", "alice-token")
	alice := signedIn["access_token"].(string)
	echo := s.botID(t, "alpha", "https://example.com/bots|echo")
	betaEcho := s.botID(t, "beta", "https://example.com/bots|echo")
	tokenCases := jwtAttacks(t, s, signedIn)

	// A job of alice's, for the job status routes.
	async := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+echo+"/$execute", "text/plain", "later",
		"Authorization", "Bearer "+alice, "Prefer", "respond-async")
	job, _ := url.Parse(async.header.Get("Content-Location"))
	if async.status != 202 || job == nil {
		t.Fatalf("async run: %d %s", async.status, async.body)
	}

	var cases []hostileCase
	cases = append(cases, tokenCases...)
	cases = append(cases, pathCases(alice, echo, betaEcho)...)
	cases = append(cases, methodCases(alice, echo, job.Path)...)
	cases = append(cases, headerCases(alice, echo)...)
	cases = append(cases, bodyCases(alice, echo)...)
	cases = append(cases, formCases(alice, echo)...)
	cases = append(cases, slowCases(alice, echo)...)

	_, aliceClaims := jwtParts(t, alice)
	wantIdentity := map[string]string{
		"X-Fhirgate-User": aliceClaims["sub"].(string), "X-Fhirgate-Profile": "Practitioner/alice",
		"X-Fhirgate-Project": "alpha", "X-Fhirgate-Client": "alpha-app", "X-Fhirgate-Scope": "openid offline",
	}
	var fivexx []string
	ran := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.bug != "" {
				t.Skip("BUG: " + tc.bug)
			}
			ran++
			before := s.backend.count.Load()
			r := sendRaw(s.gateway, tc.req, 30*time.Second)
			if r.err != nil {
				t.Fatalf("no response after %v: %v", r.elapsed, r.err)
			}
			if r.status >= 500 {
				fivexx = append(fivexx, tc.name)
			}
			reached := s.backend.count.Load() - before
			checkHostile(t, tc, r, reached)
			if reached > 0 {
				got := s.backend.last()
				for name, want := range wantIdentity {
					if v := got.Header.Get(name); v != want {
						t.Errorf("the backend got %s: %q, want %q", name, v, want)
					}
				}
				if got.Header.Get("Authorization") != "" {
					t.Errorf("the backend got the caller's Authorization header")
				}
			}
		})
	}
	if len(fivexx) > 0 {
		t.Errorf("5xx answers: %v", fivexx)
	}
	bugs := 0
	for _, tc := range cases {
		if tc.bug != "" {
			bugs++
		}
	}
	t.Logf("hostile requests: %d cases, %d skipped as known bugs, %d run here", len(cases), bugs, ran)

	t.Run("slowloris bodies do not stop the gateway", func(t *testing.T) {
		slowloris(t, s, alice, echo)
	})
	t.Run("healthy afterwards", func(t *testing.T) {
		gatewayHealthy(t, s, alice, echo)
	})
}

// checkHostile asserts one answer.
func checkHostile(t *testing.T, tc hostileCase, r rawResponse, reached int64) {
	t.Helper()
	switch {
	case tc.want != 0 && r.status != tc.want:
		t.Fatalf("status %d, want %d: %.300s", r.status, tc.want, r.body)
	case tc.want == 0 && (r.status < 400 || r.status >= 500):
		t.Fatalf("status %d, want a 4xx: %.300s", r.status, r.body)
	}
	if tc.body == backendBody {
		if reached != 1 {
			t.Fatalf("meant for the backend, which saw %d requests", reached)
		}
	} else if reached != 0 {
		t.Fatalf("the backend saw %d requests", reached)
	}
	var m map[string]any
	isJSON := json.Unmarshal(r.body, &m) == nil
	outcome := isJSON && m["resourceType"] == "OperationOutcome"
	oauthErr := isJSON && m["error"] != nil && m["error"] != ""
	switch tc.body {
	case outcomeBody:
		if !outcome {
			t.Fatalf("body is not an OperationOutcome: %.300s", r.body)
		}
	case oauthBody:
		if !oauthErr {
			t.Fatalf("body is not an OAuth error: %.300s", r.body)
		}
	case eitherBody:
		if !outcome && !oauthErr {
			t.Fatalf("body is neither an OperationOutcome nor an OAuth error: %.300s", r.body)
		}
	case noBody:
		if len(r.body) != 0 {
			t.Fatalf("HEAD answered with a body: %.300s", r.body)
		}
	}
	if tc.invalidToken {
		if h := r.header.Get("WWW-Authenticate"); !strings.Contains(h, `error="invalid_token"`) {
			t.Fatalf("WWW-Authenticate %q, want error=\"invalid_token\"", h)
		}
	}
	if tc.check != nil {
		tc.check(t, r)
	}
}

// rawGet and rawPost build raw requests.
func rawGet(target string, headers ...string) rawRequest {
	return rawRequest{method: "GET", target: target, headers: headers}
}

func rawPost(target, contentType, body string, headers ...string) rawRequest {
	if contentType != "" {
		headers = append(headers, "Content-Type: "+contentType)
	}
	return rawRequest{method: "POST", target: target, headers: headers, body: []byte(body)}
}

// head is a request with only a head: what it declares of a body is never
// sent.
func head(method, target string, headers ...string) rawRequest {
	return rawRequest{method: method, target: target, headers: headers}
}

func bearerLine(tok string) string { return "Authorization: Bearer " + tok }

// jwtAttacks are the token attacks, each against a proxied read and a bot
// run: 401 invalid_token, an OperationOutcome, the backend untouched.
func jwtAttacks(t *testing.T, s *stack, signedIn map[string]any) []hostileCase {
	access := signedIn["access_token"].(string)
	hdr, claims := jwtParts(t, access)
	kid := hdr["kid"].(string)
	parts := strings.Split(access, ".")
	now := time.Now().Unix()
	_, gatewayKey := s.signingKey(t)
	attacker := newECKey(t)
	jwks := do(t, "GET", s.gateway+"/.well-known/jwks.json", "", "")
	jwkJSON, pemKey := publishedKey(t, jwks.body)

	bob := s.token(t, "beta-app", "bob-token")
	_, bobClaims := jwtParts(t, bob)

	revoked := s.signIn(t, "alpha-app", "alice-token")
	if r := do(t, "POST", s.gateway+"/oauth2/revoke", "application/x-www-form-urlencoded",
		url.Values{"token": {revoked["refresh_token"].(string)}}.Encode()); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	other := startStack(t, "")
	foreign := other.token(t, "alpha-app", "alice-token")

	at := func(h map[string]any) map[string]any { // header with changes
		out := map[string]any{"alg": "ES256", "kid": kid, "typ": "at+jwt"}
		for k, v := range h {
			if v == nil {
				delete(out, k)
			} else {
				out[k] = v
			}
		}
		return out
	}
	tampered := func(changes map[string]any) string {
		return parts[0] + "." + b64JSON(t, withClaims(claims, changes)) + "." + parts[2]
	}
	pub := attacker.PublicKey
	attackerJWK := map[string]any{"kty": "EC", "crv": "P-256",
		"x": b64url(pub.X.FillBytes(make([]byte, 32))), "y": b64url(pub.Y.FillBytes(make([]byte, 32)))}

	attacks := []struct{ name, token string }{
		{"alg none", b64JSON(t, at(map[string]any{"alg": "none"})) + "." + parts[1] + "."},
		{"alg none keeping the signature", b64JSON(t, at(map[string]any{"alg": "none"})) + "." + parts[1] + "." + parts[2]},
		{"alg None", b64JSON(t, at(map[string]any{"alg": "None"})) + "." + parts[1] + "."},
		{"no alg", b64JSON(t, at(map[string]any{"alg": nil})) + "." + parts[1] + "." + parts[2]},
		{"HS256 keyed with the published JWK", signHS256(t, jwkJSON, at(map[string]any{"alg": "HS256"}), claims)},
		{"HS256 keyed with the public key PEM", signHS256(t, pemKey, at(map[string]any{"alg": "HS256"}), claims)},
		{"RS256", signRS256(t, at(map[string]any{"alg": "RS256"}), claims)},
		{"ES384 label on an ES256 signature", signES256(t, gatewayKey, at(map[string]any{"alg": "ES384"}), claims)},
		{"unknown kid", signES256(t, attacker, at(map[string]any{"kid": uuid.NewString()}), claims)},
		{"our kid, the attacker's key", signES256(t, attacker, at(nil), claims)},
		{"embedded jwk header", signES256(t, attacker, at(map[string]any{"jwk": attackerJWK}), claims)},
		{"jku header", signES256(t, attacker, at(map[string]any{"kid": "evil", "jku": "http://127.0.0.1:1/jwks.json"}), claims)},
		{"kid path traversal", signES256(t, attacker, at(map[string]any{"kid": "../../../../dev/null"}), claims)},
		{"no kid", signES256(t, gatewayKey, at(map[string]any{"kid": nil}), claims)},
		{"tampered payload: another user", tampered(map[string]any{"sub": bobClaims["sub"], "login_id": bobClaims["login_id"]})},
		{"tampered payload: exp extended", tampered(map[string]any{"exp": now + 86400*365})},
		{"tampered payload: profile", tampered(map[string]any{"profile": "Practitioner/bob"})},
		{"signature stripped", parts[0] + "." + parts[1] + "."},
		{"signature of another token", parts[0] + "." + parts[1] + "." + strings.Split(bob, ".")[2]},
		{"truncated signature", parts[0] + "." + parts[1] + "." + parts[2][:40]},
		{"expired (signed with the gateway's key)", signES256(t, gatewayKey, hdr, withClaims(claims, map[string]any{"exp": now - 3600, "iat": now - 7200, "nbf": now - 7200}))},
		{"nbf in the future (signed with the gateway's key)", signES256(t, gatewayKey, hdr, withClaims(claims, map[string]any{"nbf": now + 600}))},
		{"iat in the future (signed with the gateway's key)", signES256(t, gatewayKey, hdr, withClaims(claims, map[string]any{"iat": now + 600}))},
		{"wrong issuer (signed with the gateway's key)", signES256(t, gatewayKey, hdr, withClaims(claims, map[string]any{"iss": "http://evil.example"}))},
		{"no exp (signed with the gateway's key)", signES256(t, gatewayKey, hdr, withClaims(claims, map[string]any{"exp": nil}))},
		{"typ JWT (signed with the gateway's key)", signES256(t, gatewayKey, at(map[string]any{"typ": "JWT"}), claims)},
		{"crit header (signed with the gateway's key)", signES256(t, gatewayKey, at(map[string]any{"crit": []string{"exp"}}), claims)},
		{"another user's sub on alice's sign-in (signed)", signES256(t, gatewayKey, hdr, withClaims(claims, map[string]any{"sub": bobClaims["sub"]}))},
		{"a sign-in that never existed (signed)", signES256(t, gatewayKey, hdr, withClaims(claims, map[string]any{"login_id": uuid.NewString()}))},
		{"refresh token used as an access token", signedIn["refresh_token"].(string)},
		{"id token used as an access token", signedIn["id_token"].(string)},
		{"token from another deployment", foreign},
		{"revoked token", revoked["access_token"].(string)},
		{"JWE-shaped", "eyJhbGciOiJSU0EtT0FFUCJ9.a.b.c.d"},
		{"four parts", access + "."},
		{"trailing garbage", access + "x"},
		{"garbage", "not-a-token"},
		{"oversized", parts[0] + "." + strings.Repeat("A", 9000) + "." + parts[2]},
	}
	var cases []hostileCase
	for _, a := range attacks {
		cases = append(cases,
			hostileCase{name: "jwt/" + a.name + "/read", req: rawGet("/fhir/R4/Patient/1", bearerLine(a.token)), want: 401, body: outcomeBody, invalidToken: true},
			hostileCase{name: "jwt/" + a.name + "/bot", req: rawPost("/fhir/R4/Bot/$execute?identifier=https://example.com/bots|echo", "text/plain", "x", bearerLine(a.token)),
				want: 401, body: outcomeBody, invalidToken: true},
		)
	}
	// How the token is presented.
	for _, h := range []struct{ name, header string }{
		{"token as Basic credentials", "Authorization: Basic " + access},
		{"scheme only", "Authorization: Bearer"},
		{"other scheme", "Authorization: Token " + access},
		{"bearer twice", "Authorization: Bearer Bearer " + access},
	} {
		cases = append(cases, hostileCase{name: "jwt/" + h.name, req: rawGet("/fhir/R4/Patient/1", h.header), want: 401, body: outcomeBody})
	}
	cases = append(cases,
		hostileCase{name: "jwt/two Authorization headers, one valid", req: rawGet("/fhir/R4/Patient/1", bearerLine(access), "Authorization: Bearer x"), want: 401, body: outcomeBody},
		hostileCase{name: "jwt/the same valid token twice", req: rawGet("/fhir/R4/Patient/1", bearerLine(access), bearerLine(access)), want: 401, body: outcomeBody},
		hostileCase{name: "jwt/token in the query", req: rawGet("/fhir/R4/Patient/1?access_token=" + access), want: 401, body: outcomeBody},
		hostileCase{name: "jwt/token in a cookie", req: rawGet("/fhir/R4/Patient/1", "Cookie: access_token="+access), want: 401, body: outcomeBody},
	)
	return cases
}

// pathCases are path tricks: without a token every one is refused before
// the backend; with one, $execute smuggled into other paths never runs a
// bot outside the Bot routes.
func pathCases(alice, echo, betaEcho string) []hostileCase {
	var cases []hostileCase
	for _, p := range []string{
		"/fhir/R4/Patient/1",
		"/fhir/R4/Bot/..%2f..%2fadmin",
		"/fhir/R4/Bot/..%2F..%2Fadmin",
		"/fhir/R4/Bot/..%252f..%252fadmin",
		"/x/../fhir/R4/Patient",
		"/x/..%2ffhir/R4/Patient",
		"/%2e%2e/fhir/R4/Patient",
		"/x/%2e%2e/fhir/R4/Patient",
		"/x/%252e%252e/fhir/R4/Patient",
		"/fhir/R4/%2e%2e/R4/Patient",
		"/fhir/./R4/Patient",
		"/fhir;a/R4/Patient",
		"/fhir/R4;a/Patient",
		"/fhir/R4/Patient;jsessionid=1",
		"/fhir%3Ba/R4/Patient",
		"/fhir/R4/Patient%00",
		"/fhir/R4/%00/../Patient",
		"/fhir/R4/Patient/1%00.json",
		"/%66hir/R4/Patient",
		"/%2566hir/R4/Patient",
		"/%252566hir/R4/Patient",
		"/fhir%2FR4%2FPatient",
		"/fhir%252FR4%252FPatient",
		`/fhir\R4\Patient`,
		`/x\..\fhir\R4\Patient`,
		"/fhir%5cR4%5cPatient",
		"/x%5c..%5cfhir%5cR4%5cPatient",
		"/FHIR/R4/Patient",
		"/Fhir/r4/patient",
		"/%46HIR/R4/Patient",
		"//fhir/R4/Patient",
		"/fhir//R4/Patient",
		"/fhir/R4//Patient",
		"/fhir/R4",
		"/fhir/R4/",
		"/fhir/R4/metadata/../Patient",
		"/fhir/R4/metadata/%2e%2e/Patient",
		"/fhir/R4/metadata%2f..%2fPatient",
		"/fhir/R4/metadata;/../Patient",
		"/fhir/R4/.well-known/smart-configuration/../../Patient",
		"/fhir/R4/METADATA/../Patient",
		"/fhir/R4/Patient/$execute",
		"/fhir/R4/Patient/1/$execute?identifier=https://example.com/bots|echo",
		"/fhir/R4/Bot/" + echo + "/$execute",
		"/fhir/R4/Bot/%24execute?identifier=https://example.com/bots|echo",
		"/fhir/R4/job/x/status",
		"/fhir/R4/Patient/\xff",
		"/fhir/R4/Patient?name=%ff",
		"/fhir/R4/Patient?name=\xfe\xff",
		"/fhir/R4/Patient#fragment",
		"/fhir/R4/Patient/" + strings.Repeat("a", 8<<10),
		"http://localhost/fhir/R4/Patient",
	} {
		cases = append(cases, hostileCase{name: "path/no token " + printablePath(p), req: rawGet(p), want: 401, body: outcomeBody})
	}
	auth := bearerLine(alice)
	bot := "/fhir/R4/Bot/" + echo
	cases = append(cases,
		// Outside the Bot routes a $execute is an ordinary FHIR path: proxied
		// with the caller's identity, never a bot run.
		hostileCase{name: "smuggle/Patient $execute is proxied", req: rawPost("/fhir/R4/Patient/$execute", "text/plain", "x", auth), want: 201, body: backendBody},
		hostileCase{name: "smuggle/Patient/1 $execute with identifier is proxied",
			req: rawGet("/fhir/R4/Patient/1/$execute?identifier=https://example.com/bots|echo", auth), want: 200, body: backendBody},
		hostileCase{name: "smuggle/dot segments out of Bot are proxied", req: rawPost(bot+"/../../Patient/$execute", "text/plain", "x", auth), want: 201, body: backendBody},
		hostileCase{name: "smuggle/encoded dot segment out of Bot is proxied", req: rawPost("/fhir/R4/Bot/%2e%2e/$execute", "text/plain", "x", auth), want: 201, body: backendBody},
		hostileCase{name: "smuggle/lower-case bot is not a Bot route", req: rawPost("/fhir/R4/bot/"+echo+"/$execute", "text/plain", "x", auth), want: 201, body: backendBody},
		// fhir_base is matched case-insensitively, by the gate and the Bot
		// routes alike: the gate's one reading of the path.
		hostileCase{name: "smuggle/lower-case base is the base", req: rawPost("/fhir/r4/Bot/"+echo+"/$execute", "text/plain", "x", auth), want: 200, body: caddyBody,
			check: func(t *testing.T, r rawResponse) {
				if string(r.body) != "x" {
					t.Fatalf("echo answered %q", r.body)
				}
			}},
		hostileCase{name: "smuggle/another project's bot", req: rawPost("/fhir/R4/Bot/"+betaEcho+"/$execute", "text/plain", "x", auth), want: 404, body: outcomeBody},
		// Not $execute: operations the gate does not know are refused by
		// authorization before they reach a bot or the backend.
		hostileCase{name: "smuggle/$EXECUTE", req: rawPost(bot+"/$EXECUTE", "text/plain", "x", auth), want: 403, body: outcomeBody},
		hostileCase{name: "smuggle/$execute with NUL", req: rawPost(bot+"/$execute%00", "text/plain", "x", auth), want: 403, body: outcomeBody},
		hostileCase{name: "smuggle/;param on the bot id", req: rawPost(bot+";x/$execute", "text/plain", "x", auth), want: 404, body: outcomeBody},
		hostileCase{name: "smuggle/encoded slash in the bot id", req: rawPost("/fhir/R4/Bot/"+echo+"%2f..%2f"+betaEcho+"/$execute", "text/plain", "x", auth), want: 404, body: outcomeBody},
		hostileCase{name: "smuggle/unsupported Bot sub-path", req: rawGet(bot+"/_history/1/x", auth), want: 404, body: outcomeBody},
		hostileCase{name: "identifier/twice", req: rawPost("/fhir/R4/Bot/$execute?identifier=a|b&identifier=a|b", "text/plain", "x", auth), want: 400, body: outcomeBody},
		hostileCase{name: "identifier/empty", req: rawPost("/fhir/R4/Bot/$execute?identifier=", "text/plain", "x", auth), want: 400, body: outcomeBody},
		hostileCase{name: "identifier/none", req: rawPost("/fhir/R4/Bot/$execute", "text/plain", "x", auth), want: 400, body: outcomeBody},
		hostileCase{name: "identifier/only a bar", req: rawPost("/fhir/R4/Bot/$execute?identifier=%7C", "text/plain", "x", auth), want: 404, body: outcomeBody},
		hostileCase{name: "identifier/NUL", req: rawPost("/fhir/R4/Bot/$execute?identifier=https://example.com/bots%7Cecho%00", "text/plain", "x", auth), want: 404, body: outcomeBody},
		hostileCase{name: "identifier/invalid UTF-8", req: rawPost("/fhir/R4/Bot/$execute?identifier=%ff%7C%fe", "text/plain", "x", auth), want: 404, body: outcomeBody},
		hostileCase{name: "identifier/extra bar", req: rawPost("/fhir/R4/Bot/$execute?identifier=https://example.com/bots%7Cecho%7Cx", "text/plain", "x", auth), want: 404, body: outcomeBody},
		hostileCase{name: "identifier/12 KB", req: rawPost("/fhir/R4/Bot/$execute?identifier="+strings.Repeat("x", 12<<10), "text/plain", "x", auth), want: 404, body: outcomeBody},
		// Caddy caps the request head at 16 KiB (+4 KiB): longer is its own 431.
		hostileCase{name: "identifier/60 KB", req: rawPost("/fhir/R4/Bot/$execute?identifier="+strings.Repeat("x", 60<<10), "text/plain", "x", auth), want: 431, body: caddyBody},
		hostileCase{name: "path/100 KB path", req: rawGet("/fhir/R4/Patient/" + strings.Repeat("a", 100<<10)), want: 431, body: caddyBody},
		hostileCase{name: "identifier/bad escape", req: rawPost("/fhir/R4/Bot/$execute?identifier=%zz", "text/plain", "x", auth), want: 0, body: outcomeBody},
		hostileCase{name: "identifier/semicolon separator", req: rawPost("/fhir/R4/Bot/$execute?a=1;identifier=https://example.com/bots%7Cecho", "text/plain", "x", auth), want: 0, body: outcomeBody},
		hostileCase{name: "identifier/_method query is refused", req: rawPost("/fhir/R4/Bot/$execute?identifier=https://example.com/bots%7Cecho&_method=DELETE",
			"text/plain", "kept", auth), want: 400, body: outcomeBody},
		hostileCase{name: "identifier/method override header is ignored", req: rawPost("/fhir/R4/Bot/$execute?identifier=https://example.com/bots%7Cecho",
			"text/plain", "kept", auth, "X-HTTP-Method-Override: DELETE"), want: 200, body: caddyBody,
			check: func(t *testing.T, r rawResponse) {
				if string(r.body) != "kept" {
					t.Fatalf("echo answered %q", r.body)
				}
			}},
		// Paths whose literal form is under the FHIR base but whose
		// normalised form is not: a backend that does not resolve dot
		// segments or drop ;params reads them under /fhir/R4.
		hostileCase{name: "path/no token literal dot segments out of the base", req: rawGet("/fhir/R4/../../admin"), want: 401, body: outcomeBody},
		hostileCase{name: "path/no token ..; segments out of the base", req: rawGet("/fhir/R4/..;/..;/admin"), want: 401, body: outcomeBody},
		hostileCase{name: "path/no token encoded slashes and dots out of the base", req: rawGet("/fhir/R4%2f..%2f..%2fadmin"), want: 401, body: outcomeBody},
		hostileCase{name: "path/no token ..; into a public path", req: rawGet("/fhir/R4/Patient/..;/metadata"), want: 401, body: outcomeBody},
	)
	return cases
}

func printablePath(p string) string {
	if len(p) > 60 {
		p = p[:40] + fmt.Sprintf("…(%d bytes)", len(p))
	}
	return strings.ToValidUTF8(p, "?")
}

// methodCases send the wrong method to every endpoint.
func methodCases(alice, echo, jobPath string) []hostileCase {
	var cases []hostileCase
	add := func(name, method, target string, want int, kind bodyKind, headers ...string) {
		if method == "HEAD" {
			kind = noBody
		}
		cases = append(cases, hostileCase{name: "method/" + name + " " + method,
			req: rawRequest{method: method, target: target, headers: headers, body: []byte{}}, want: want, body: kind})
	}
	for _, m := range []string{"GET", "PUT", "DELETE", "PATCH", "OPTIONS"} {
		add("token", m, "/oauth2/token", 405, oauthBody)
	}
	for _, m := range []string{"GET", "PUT"} {
		add("revoke", m, "/oauth2/revoke", 405, oauthBody)
		add("introspect", m, "/oauth2/introspect", 405, oauthBody)
	}
	for _, m := range []string{"POST", "DELETE"} {
		add("jwks", m, "/.well-known/jwks.json", 405, oauthBody)
		add("openid-configuration", m, "/.well-known/openid-configuration", 405, oauthBody)
		add("oauth-authorization-server", m, "/.well-known/oauth-authorization-server", 405, oauthBody)
	}
	for _, m := range []string{"GET", "PUT"} {
		add("legacy exchange", m, "/auth/exchange", 405, outcomeBody)
	}
	add("me without a token", "POST", "/auth/me", 401, outcomeBody)
	auth := bearerLine(alice)
	bot := "/fhir/R4/Bot/" + echo
	for _, m := range []string{"POST", "DELETE"} {
		add("me", m, "/auth/me", 405, outcomeBody, auth)
	}
	for _, m := range []string{"PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "TRACE", "get"} {
		add("execute by id", m, bot+"/$execute", 405, outcomeBody, auth)
	}
	for _, m := range []string{"PUT", "DELETE"} {
		add("execute by identifier", m, "/fhir/R4/Bot/$execute?identifier=https://example.com/bots|echo", 405, outcomeBody, auth)
	}
	for _, m := range []string{"PUT", "PATCH", "DELETE"} {
		add("Bot type", m, "/fhir/R4/Bot", 405, outcomeBody, auth)
	}
	for _, m := range []string{"POST", "PATCH"} {
		add("Bot instance", m, bot, 405, outcomeBody, auth)
	}
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		add("deploy", m, bot+"/$deploy", 405, outcomeBody, auth)
	}
	for _, m := range []string{"POST", "DELETE"} {
		add("job status", m, jobPath, 405, outcomeBody, auth)
	}
	return cases
}

// headerCases are bad, huge and duplicated headers.
func headerCases(alice, echo string) []hostileCase {
	auth := bearerLine(alice)
	run := "/fhir/R4/Bot/" + echo + "/$execute"
	many := make([]string, 500)
	for i := range many {
		many[i] = fmt.Sprintf("X-H%d: v", i)
	}
	return []hostileCase{
		{name: "header/1 MB value", req: rawGet("/fhir/R4/Patient/1", "X-Big: "+strings.Repeat("a", 1<<20)), want: 431, body: caddyBody},
		{name: "header/two 600 KB values", req: rawGet("/fhir/R4/Patient/1", "X-A: "+strings.Repeat("a", 600<<10), "X-B: "+strings.Repeat("b", 600<<10)), want: 431, body: caddyBody},
		{name: "header/1 MB value with a valid token", req: rawGet("/fhir/R4/Patient/1", auth, "X-Big: "+strings.Repeat("a", 1<<20)), want: 431, body: caddyBody},
		{name: "header/12 KB Authorization", req: rawGet("/fhir/R4/Patient/1", "Authorization: Bearer "+strings.Repeat("a", 12<<10)), want: 401, body: outcomeBody, invalidToken: true},
		{name: "header/100 KB Authorization", req: rawGet("/fhir/R4/Patient/1", "Authorization: Bearer "+strings.Repeat("a", 100<<10)), want: 431, body: caddyBody},
		{name: "header/500 headers", req: rawGet("/fhir/R4/Patient/1", many...), want: 401, body: outcomeBody},
		{name: "header/5000 headers", req: rawGet("/fhir/R4/Patient/1", append(many, append(many, append(many, many...)...)...)...), want: 431, body: caddyBody},
		{name: "header/line without a colon", req: rawGet("/fhir/R4/Patient/1", "NoColonHere"), want: 400, body: caddyBody},
		{name: "header/space in the name", req: rawGet("/fhir/R4/Patient/1", "Bad Name: x"), want: 400, body: caddyBody},
		{name: "header/NUL in the value", req: rawGet("/fhir/R4/Patient/1", "X-A: a\x00b"), want: 400, body: caddyBody},
		{name: "header/obs-fold continuation", req: rawGet("/fhir/R4/Patient/1", "X-A: a", " folded"), want: 0, body: caddyBody},
		{name: "header/invalid UTF-8 value", req: rawGet("/fhir/R4/Patient/1", "X-A: \xff\xfe"), want: 401, body: outcomeBody},
		{name: "header/invalid UTF-8 token", req: rawGet("/fhir/R4/Patient/1", "Authorization: Bearer \xff\xfe.\xfd.\xfc"), want: 401, body: outcomeBody, invalidToken: true},
		{name: "header/spoofed identity without a token", req: rawGet("/fhir/R4/Patient/1", "X-Fhirgate-User: admin", "X-Fhirgate-Project: beta"), want: 401, body: outcomeBody},
		{name: "header/spoofed identity with a token", req: rawGet("/fhir/R4/Patient/1", auth, "X-Fhirgate-User: admin", "X-Fhirgate-Project: beta", "X-Fhirgate-Scope: system/*.*"),
			want: 200, body: backendBody},
		{name: "header/spoofed identity in lower case", req: rawGet("/fhir/R4/Patient/1", auth, "x-fhirgate-project: beta", "X-FHIRGATE-USER: admin"), want: 200, body: backendBody},
		{name: "header/forwarding headers", req: rawGet("/fhir/R4/Patient/1", "X-Forwarded-For: 10.0.0.1", "Forwarded: for=10.0.0.1", "X-Forwarded-Host: admin", "X-Original-URL: /fhir/R4/metadata"),
			want: 401, body: outcomeBody},
		{name: "header/rewrite headers on a public path", req: rawGet("/fhir/R4/metadata/../Patient", "X-Original-URL: /fhir/R4/metadata", "X-Rewrite-URL: /fhir/R4/metadata"), want: 401, body: outcomeBody},
		// net/http refuses a bad head and closes at once, so these send no
		// body: unread bytes would turn the close into a reset that can
		// destroy the 400 before it is read.
		{name: "header/two different Content-Length", req: head("POST", run, auth, "Content-Length: 3", "Content-Length: 4"), want: 400, body: caddyBody},
		{name: "header/negative Content-Length", req: head("POST", run, auth, "Content-Length: -1"), want: 400, body: caddyBody},
		{name: "header/non-numeric Content-Length", req: head("POST", run, auth, "Content-Length: 3x"), want: 400, body: caddyBody},
		{name: "header/chunked with a bad chunk size", req: rawPost(run, "text/plain", "zz\r\nabc\r\n0\r\n\r\n", auth, "Transfer-Encoding: chunked"), want: 400, body: eitherBody},
		// RFC 9112 §6.3: Transfer-Encoding overrides Content-Length.
		{name: "header/chunked and Content-Length", req: rawPost(run, "text/plain", "3\r\nabc\r\n0\r\n\r\n", auth, "Transfer-Encoding: chunked", "Content-Length: 100"),
			want: 200, body: caddyBody, check: func(t *testing.T, r rawResponse) {
				if string(r.body) != "abc" {
					t.Fatalf("echo answered %q", r.body)
				}
			}},
		{name: "header/no Host", req: rawRequest{method: "GET", target: "/fhir/R4/Patient/1", noHost: true}, want: 400, body: caddyBody},
		{name: "header/two Host headers", req: rawGet("/fhir/R4/Patient/1", "Host: localhost"), want: 400, body: caddyBody},
		{name: "header/Expect unknown", req: head("POST", run, auth, "Content-Type: text/plain", "Content-Length: 1", "Expect: 200-ok"), want: 417, body: caddyBody},
		{name: "header/garbage Content-Type on a bot run", req: rawPost(run, "\xff/\xfe", "x", auth), want: 0, body: outcomeBody},
		{name: "header/garbage trace id is not echoed", req: rawPost(run, "text/plain", "x", auth, "X-Trace-Id: <script>"+strings.Repeat("a", 4000)), want: 200, body: caddyBody,
			check: func(t *testing.T, r rawResponse) {
				if _, err := uuid.Parse(r.header.Get("X-Trace-Id")); err != nil {
					t.Fatalf("trace id %q is not a fresh UUID", r.header.Get("X-Trace-Id"))
				}
			}},
		{name: "header/garbage traceparent", req: rawPost(run, "text/plain", "x", auth, "traceparent: zz-"+strings.Repeat("f", 500)), want: 200, body: caddyBody},
		{name: "header/Prefer garbage is a synchronous run", req: rawPost(run, "text/plain", "x", auth, "Prefer: respond-async-ish"), want: 200, body: caddyBody},
		{name: "header/space in the method", req: rawRequest{method: "GE T", target: "/fhir/R4/Patient/1"}, want: 400, body: caddyBody},
		{name: "header/32-byte method", req: rawRequest{method: strings.Repeat("X", 32), target: "/fhir/R4/Patient/1"}, want: 401, body: outcomeBody},
		// Caddy refuses methods over 32 bytes itself.
		{name: "header/1 KB method", req: rawRequest{method: strings.Repeat("X", 1024), target: "/fhir/R4/Patient/1"}, want: 405, body: caddyBody},
	}
}

// bodyCases are invalid UTF-8, JSON bombs and deep nesting, wrong and
// missing content types and 10 MB bodies.
func bodyCases(alice, echo string) []hostileCase {
	auth := bearerLine(alice)
	run := "/fhir/R4/Bot/" + echo + "/$execute"
	deep := func(open, close string, n int) string { return strings.Repeat(open, n) + strings.Repeat(close, n) }
	tenMB := strings.Repeat("a", 10<<20)
	huge := func(target, contentType string, headers ...string) rawRequest {
		return rawPost(target, contentType, tenMB, headers...)
	}
	chunked := func(target, contentType string, n int, headers ...string) rawRequest {
		chunk := fmt.Sprintf("%x\r\n%s\r\n", 1<<20, strings.Repeat("a", 1<<20))
		return rawRequest{method: "POST", target: target, headers: append(headers, "Transfer-Encoding: chunked", "Content-Type: "+contentType),
			body: []byte(strings.Repeat(chunk, n) + "0\r\n\r\n")}
	}
	return []hostileCase{
		{name: "body/invalid UTF-8 text", req: rawPost(run, "text/plain", "a\xffb", auth), want: 400, body: outcomeBody},
		{name: "body/invalid UTF-8 JSON", req: rawPost(run, "application/json", `{"a":"`+"\xff"+`"}`, auth), want: 400, body: outcomeBody},
		{name: "body/invalid UTF-8 FHIR JSON", req: rawPost(run, "application/fhir+json", `{"resourceType":"Patient","x":"`+"\xfe"+`"}`, auth), want: 400, body: outcomeBody},
		{name: "body/invalid UTF-8 form escape", req: rawPost(run, "application/x-www-form-urlencoded", "a=%ff", auth), want: 400, body: outcomeBody},
		{name: "body/invalid UTF-8 raw form", req: rawPost(run, "application/x-www-form-urlencoded", "a=\xff", auth), want: 400, body: outcomeBody},
		{name: "body/invalid UTF-8 HL7", req: rawPost(run, "x-application/hl7-v2+er7", "MSH|^~\\&|\xff\r", auth), want: 400, body: outcomeBody},
		{name: "body/invalid UTF-8 query on a GET run", req: rawGet(run+"?a=%ff", auth), want: 400, body: outcomeBody},
		{name: "body/10000 nested arrays", req: rawPost(run, "application/json", deep("[", "]", 10000), auth), want: 400, body: outcomeBody},
		{name: "body/10000 nested objects", req: rawPost(run, "application/json", deep(`{"a":`, "}", 10000), auth), want: 400, body: outcomeBody},
		{name: "body/10000 nested arrays in a resource", req: rawPost(run, "application/fhir+json", `{"resourceType":"Patient","x":`+deep("[", "]", 10000)+`}`, auth),
			want: 400, body: outcomeBody},
		{name: "body/129 nested arrays", req: rawPost(run, "application/json", deep("[", "]", 129), auth), want: 400, body: outcomeBody},
		{name: "body/60 KB of unclosed arrays", req: rawPost(run, "application/json", strings.Repeat("[", 60<<10), auth), want: 400, body: outcomeBody},
		{name: "body/lone surrogate", req: rawPost(run, "application/json", `{"a":"\ud800"}`, auth), want: 200, body: caddyBody},
		{name: "body/huge exponent", req: rawPost(run, "application/json", `[1e999999]`, auth), want: 200, body: caddyBody},
		{name: "body/9000 duplicate keys", req: rawPost(run, "application/json", "{"+strings.TrimSuffix(strings.Repeat(`"k":1,`, 9000), ",")+"}", auth), want: 200, body: caddyBody},
		{name: "body/duplicate resourceType, last is not a resource", req: rawPost(run, "application/fhir+json", `{"resourceType":"Patient","resourceType":"NotAResource"}`, auth),
			want: 400, body: outcomeBody},
		{name: "body/JSON scalar", req: rawPost(run, "application/json", `"x"`, auth), want: 400, body: outcomeBody},
		{name: "body/JSON with trailing garbage", req: rawPost(run, "application/json", `{}{}`, auth), want: 400, body: outcomeBody},
		{name: "body/NUL in JSON", req: rawPost(run, "application/json", "{\"a\":1}\x00", auth), want: 400, body: outcomeBody},
		{name: "body/HL7 that is not HL7", req: rawPost(run, "x-application/hl7-v2+er7", strings.Repeat("|", 1000), auth), want: 400, body: outcomeBody},
		{name: "body/unsupported content type", req: rawPost(run, "application/xml", "<a/>", auth), want: 415, body: outcomeBody},
		{name: "body/multipart", req: rawPost(run, "multipart/form-data; boundary=x", "--x--", auth), want: 415, body: outcomeBody},
		{name: "body/latin1 charset", req: rawPost(run, "text/plain; charset=latin1", "x", auth), want: 415, body: outcomeBody},
		{name: "body/malformed content type", req: rawPost(run, "text/plain;;;=", "x", auth), want: 400, body: outcomeBody},
		{name: "body/body without content type", req: rawPost(run, "", "x", auth), want: 415, body: outcomeBody},
		{name: "body/10 MB to $execute", req: huge(run, "text/plain", auth), want: 413, body: outcomeBody},
		{name: "body/10 MB chunked to $execute", req: chunked(run, "text/plain", 10, auth), want: 413, body: outcomeBody},
		{name: "body/65 KB to $execute", req: rawPost(run, "text/plain", strings.Repeat("a", 65<<10), auth), want: 413, body: outcomeBody},
		{name: "body/10 MB to $execute without a token", req: huge(run, "text/plain"), want: 401, body: outcomeBody},
		{name: "body/10 MB to a proxied path without a token", req: huge("/fhir/R4/Patient", "application/fhir+json"), want: 401, body: outcomeBody},
		{name: "body/10 MB to /oauth2/token", req: huge("/oauth2/token", "application/x-www-form-urlencoded"), want: 413, body: oauthBody},
		{name: "body/10 MB chunked to /oauth2/token", req: chunked("/oauth2/token", "application/x-www-form-urlencoded", 10), want: 413, body: oauthBody},
		{name: "body/10 MB to /oauth2/revoke", req: huge("/oauth2/revoke", "application/x-www-form-urlencoded"), want: 413, body: oauthBody},
		{name: "body/10 MB to /oauth2/introspect", req: huge("/oauth2/introspect", "application/x-www-form-urlencoded"), want: 413, body: oauthBody},
		{name: "body/10 MB to /auth/exchange", req: huge("/auth/exchange", "application/json"), want: 413, body: eitherBody},
		{name: "body/10 MB Bot create", req: huge("/fhir/R4/Bot", "application/fhir+json", auth), want: 413, body: outcomeBody},
		{name: "body/10 MB $deploy", req: huge("/fhir/R4/Bot/"+echo+"/$deploy", "application/json", auth), want: 413, body: outcomeBody},
		{name: "body/deep JSON to /auth/exchange", req: rawPost("/auth/exchange", "application/json", deep("[", "]", 10000)), want: 400, body: eitherBody},
		{name: "body/invalid JSON to /auth/exchange", req: rawPost("/auth/exchange", "application/json", `{"clientId":`), want: 400, body: eitherBody},
		{name: "body/deep JSON Bot create", req: rawPost("/fhir/R4/Bot", "application/fhir+json", deep(`{"a":`, "}", 10000), auth), want: 400, body: outcomeBody},
		{name: "body/Bot create with an unknown field", req: rawPost("/fhir/R4/Bot", "application/fhir+json", `{"resourceType":"Bot","name":"x","meta":{"project":"beta"},"evil":1}`, auth),
			want: 400, body: outcomeBody},
		{name: "body/Bot create as a Patient", req: rawPost("/fhir/R4/Bot", "application/fhir+json", `{"resourceType":"Patient","name":"x"}`, auth), want: 400, body: outcomeBody},
		{name: "body/Bot create as text", req: rawPost("/fhir/R4/Bot", "text/plain", `{"resourceType":"Bot","name":"x"}`, auth), want: 415, body: outcomeBody},
		{name: "body/Bot create with a 70 KB identifier", req: rawPost("/fhir/R4/Bot", "application/fhir+json",
			`{"resourceType":"Bot","name":"big","identifier":[{"system":"s","value":"`+strings.Repeat("v", 70<<10)+`"}]}`, auth), want: 400, body: outcomeBody},
		{name: "body/Bot update with another id", req: rawRequest{method: "PUT", target: "/fhir/R4/Bot/" + echo,
			headers: []string{auth, "Content-Type: application/fhir+json"}, body: []byte(`{"resourceType":"Bot","id":"other","name":"x"}`)}, want: 400, body: outcomeBody},
		{name: "body/$deploy that is not JSON", req: rawPost("/fhir/R4/Bot/"+echo+"/$deploy", "application/json", `{"code":`, auth), want: 400, body: outcomeBody},
	}
}

// formCases are duplicate and malformed form keys, to the token endpoint
// and to $execute.
func formCases(alice, echo string) []hostileCase {
	auth := bearerLine(alice)
	run := "/fhir/R4/Bot/" + echo + "/$execute"
	form := "application/x-www-form-urlencoded"
	exchange := url.Values{
		"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"client_id":          {"alpha-app"},
		"subject_token":      {"alice-token"},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}
	with := func(key, value string) string {
		v := url.Values{}
		for k, vs := range exchange {
			v[k] = append([]string(nil), vs...)
		}
		v.Add(key, value)
		return v.Encode()
	}
	set := func(key, value string) string {
		v := url.Values{}
		for k, vs := range exchange {
			v[k] = append([]string(nil), vs...)
		}
		v.Set(key, value)
		return v.Encode()
	}
	tok := func(name, body string, want int, code string) hostileCase {
		return hostileCase{name: "token/" + name, req: rawPost("/oauth2/token", form, body), want: want, body: oauthBody,
			check: func(t *testing.T, r rawResponse) {
				var m map[string]any
				_ = json.Unmarshal(r.body, &m)
				if m["error"] != code {
					t.Fatalf("error %v, want %s", m["error"], code)
				}
				if r.header.Get("Cache-Control") != "no-store" {
					t.Fatalf("Cache-Control %q", r.header.Get("Cache-Control"))
				}
			}}
	}
	manyKeys := make([]string, 5000)
	for i := range manyKeys {
		manyKeys[i] = fmt.Sprintf("k%d=", i)
	}
	cases := []hostileCase{}
	for _, key := range []string{"grant_type", "client_id", "subject_token", "subject_token_type"} {
		cases = append(cases, tok("duplicate "+key, with(key, exchange.Get(key)+"x"), 400, "invalid_request"))
	}
	cases = append(cases, tok("duplicate scope", set("scope", "openid")+"&scope=offline", 400, "invalid_request"))
	cases = append(cases,
		tok("duplicate grant_type, same value", with("grant_type", exchange.Get("grant_type")), 400, "invalid_request"),
		tok("semicolon separators", strings.ReplaceAll(exchange.Encode(), "&", ";"), 400, "invalid_request"),
		tok("invalid UTF-8 escape", set("subject_token", "\xff"), 400, "invalid_request"),
		tok("invalid UTF-8 raw", "grant_type=\xff", 400, "invalid_request"),
		tok("bad escape", "grant_type=%zz", 400, "invalid_request"),
		tok("5000 keys", strings.Join(manyKeys, "&"), 400, "invalid_request"),
		tok("65 KB form", "a="+strings.Repeat("a", 65<<10), 413, "invalid_request"),
		tok("password grant", "grant_type=password&username=a&password=b", 400, "unsupported_grant_type"),
		tok("client_credentials grant without client credentials", "grant_type=client_credentials&client_id=alpha-app", 401, "invalid_client"),
		tok("authorization_code grant", "grant_type=authorization_code&code=x", 400, "unsupported_grant_type"),
		tok("garbage refresh token", "grant_type=refresh_token&refresh_token=x.y.z", 400, "invalid_grant"),
		tok("unknown client", set("client_id", "nope"), 401, "invalid_client"),
		tok("NUL in client_id", set("client_id", "alpha-app\x00"), 401, "invalid_client"),
		tok("another project's client", set("client_id", "beta-app"), 400, "invalid_grant"),
		tok("id_token subject type", set("subject_token_type", "urn:ietf:params:oauth:token-type:id_token"), 400, "invalid_request"),
		tok("actor token", with("actor_token", "x"), 400, "invalid_request"),
		tok("refresh token requested", with("requested_token_type", "urn:ietf:params:oauth:token-type:refresh_token"), 400, "invalid_request"),
		tok("quote in scope", set("scope", `openid "x`), 400, "invalid_scope"),
		tok("rejected subject token", set("subject_token", "nope"), 400, "invalid_grant"),
		tok("60 KB subject token", set("subject_token", strings.Repeat("a", 60<<10)), 400, "invalid_grant"),
		tok("unknown membership", with("membership_id", "../../Project/beta"), 400, "invalid_grant"),
		hostileCase{name: "token/JSON body", req: rawPost("/oauth2/token", "application/json", `{"grant_type":"refresh_token"}`), want: 400, body: oauthBody},
		hostileCase{name: "token/no content type", req: rawPost("/oauth2/token", "", exchange.Encode()), want: 400, body: oauthBody},
		hostileCase{name: "token/multipart", req: rawPost("/oauth2/token", "multipart/form-data; boundary=x", "--x--"), want: 400, body: oauthBody},
		hostileCase{name: "token/malformed Basic credentials", req: rawPost("/oauth2/token", form, exchange.Encode(), "Authorization: Basic JXp6OiV6eg=="), want: 401, body: oauthBody},
		hostileCase{name: "token/Basic client differs from the body", req: rawPost("/oauth2/token", form, exchange.Encode(), "Authorization: Basic YmV0YS1hcHA6"), want: 400, body: oauthBody},
		hostileCase{name: "revoke/duplicate token", req: rawPost("/oauth2/revoke", form, "token=a&token=b"), want: 400, body: oauthBody},
		hostileCase{name: "revoke/missing token", req: rawPost("/oauth2/revoke", form, "x=1"), want: 400, body: oauthBody},
		hostileCase{name: "introspect/without a client", req: rawPost("/oauth2/introspect", form, "token=a"), want: 401, body: oauthBody},
		hostileCase{name: "introspect/duplicate client_id", req: rawPost("/oauth2/introspect", form, "token=a&client_id=alpha-app&client_id=beta-app"), want: 400, body: oauthBody},
		hostileCase{name: "execute form/duplicate key", req: rawPost(run, form, "a=1&a=2", auth), want: 400, body: outcomeBody},
		hostileCase{name: "execute form/duplicate key, same value", req: rawPost(run, form, "a=1&b=2&a=1", auth), want: 400, body: outcomeBody},
		hostileCase{name: "execute form/duplicate empty keys", req: rawPost(run, form, "=1&=2", auth), want: 400, body: outcomeBody},
		hostileCase{name: "execute form/semicolon separator", req: rawPost(run, form, "a=1;b=2", auth), want: 400, body: outcomeBody},
		hostileCase{name: "execute form/bad escape", req: rawPost(run, form, "a=%zz", auth), want: 400, body: outcomeBody},
		hostileCase{name: "execute form/duplicate query key on GET", req: rawGet(run+"?a=1&a=2", auth), want: 400, body: outcomeBody},
		hostileCase{name: "execute form/5000 keys", req: rawPost(run, form, strings.Join(manyKeys, "&"), auth), want: 200, body: caddyBody},
	)
	return cases
}

// slowCases send bodies that trickle in and then stop: each request must
// end with a 4xx once the client gives up, not hang.
func slowCases(alice, echo string) []hostileCase {
	auth := bearerLine(alice)
	slow := func(target, contentType string, headers ...string) rawRequest {
		return rawRequest{method: "POST", target: target,
			headers: append(headers, "Content-Type: "+contentType, "Content-Length: 100000"),
			stream:  trickle("aaaa", 20, 100*time.Millisecond)}
	}
	bounded := func(t *testing.T, r rawResponse) {
		if r.elapsed > 20*time.Second {
			t.Fatalf("took %v", r.elapsed)
		}
	}
	return []hostileCase{
		{name: "slow/body to $execute stops half way", req: slow("/fhir/R4/Bot/"+echo+"/$execute", "text/plain", auth), want: 400, body: outcomeBody, check: bounded},
		{name: "slow/body to /oauth2/token stops half way", req: slow("/oauth2/token", "application/x-www-form-urlencoded"), want: 400, body: oauthBody, check: bounded},
		{name: "slow/body to Bot create stops half way", req: slow("/fhir/R4/Bot", "application/fhir+json", auth), want: 400, body: outcomeBody, check: bounded},
		{name: "slow/body without a token is refused at once", req: slow("/fhir/R4/Patient", "application/fhir+json"), want: 401, body: outcomeBody,
			check: func(t *testing.T, r rawResponse) {
				if r.elapsed > 1500*time.Millisecond {
					t.Fatalf("the refusal waited %v for the body", r.elapsed)
				}
			}},
		{name: "slow/chunked body to $execute stops half way", req: rawRequest{method: "POST", target: "/fhir/R4/Bot/" + echo + "/$execute",
			headers: []string{auth, "Content-Type: text/plain", "Transfer-Encoding: chunked"}, stream: trickle("1\r\na\r\n", 20, 100*time.Millisecond)},
			want: 400, body: outcomeBody, check: bounded},
	}
}

// slowloris holds many requests open with bodies that never finish while
// checking that other callers are served promptly.
func slowloris(t *testing.T, s *stack, alice, echo string) {
	const n = 40
	targets := []rawRequest{
		{method: "POST", target: "/fhir/R4/Bot/" + echo + "/$execute", headers: []string{bearerLine(alice), "Content-Type: text/plain", "Content-Length: 1000000"}},
		{method: "POST", target: "/oauth2/token", headers: []string{"Content-Type: application/x-www-form-urlencoded", "Content-Length: 1000000"}},
		{method: "POST", target: "/fhir/R4/Bot", headers: []string{bearerLine(alice), "Content-Type: application/fhir+json", "Content-Length: 1000000"}},
	}
	backend := s.backend.count.Load()
	var wg sync.WaitGroup
	results := make(chan rawResponse, n)
	for i := 0; i < n; i++ {
		req := targets[i%len(targets)]
		req.stream = hold(200 * time.Millisecond)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- sendRaw(s.gateway, req, 6*time.Second)
		}()
	}
	time.Sleep(time.Second) // let them all connect and start trickling
	start := time.Now()
	gatewayHealthy(t, s, alice, echo)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("served in %v while %d slow bodies were open", d, n)
	}
	wg.Wait()
	close(results)
	if got := s.backend.count.Load() - backend; got != 1 { // the health check's read
		t.Errorf("the backend saw %d requests, want only the health check's", got)
	}
	for r := range results {
		if r.err == nil && r.status >= 500 {
			t.Errorf("a slow body was answered %d: %s", r.status, r.body)
		}
	}
}

// gatewayHealthy checks the gateway still proxies an authenticated read with the
// caller's identity and runs a bot.
func gatewayHealthy(t *testing.T, s *stack, alice, echo string) {
	t.Helper()
	r := do(t, "GET", s.gateway+"/fhir/R4/Patient/healthy", "", "", "Authorization", "Bearer "+alice)
	if r.status != 200 || !strings.Contains(string(r.body), "FromBackend") {
		t.Fatalf("proxied read: %d %s", r.status, r.body)
	}
	if got := s.backend.last(); got.URL.Path != "/fhir/R4/Patient/healthy" || got.Header.Get("X-Fhirgate-Project") != "alpha" {
		t.Fatalf("the backend got %s with project %q", got.URL.Path, got.Header.Get("X-Fhirgate-Project"))
	}
	r = do(t, "POST", s.gateway+"/fhir/R4/Bot/"+echo+"/$execute", "text/plain", "still alive", "Authorization", "Bearer "+alice)
	if r.status != 200 || string(r.body) != "still alive" {
		t.Fatalf("bot run: %d %s", r.status, r.body)
	}
}

package oauth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
	"github.com/fhirgate/fhirgate/internal/tokens"
	"github.com/fhirgate/fhirgate/internal/userinfo"
)

// The fuzz targets share one Server per fuzzing process. newEnv needs a
// *testing.T, which a fuzz target only has per input, and opening Badger for
// every input would cost ~30 ms; so fuzzEnv builds the same real components
// once from the *testing.F and lays out the records newEnv's tests rely on.
type fuzzEnv struct {
	srv *Server
	// access, refresh and id are one sign-in's tokens for alice@example.com
	// in project p1 through client "web".
	access, refresh, id string
	userID              string
}

func newFuzzEnv(tb testing.TB) *fuzzEnv {
	tb.Helper()
	st := storetest.Open(tb)
	ctx := context.Background()

	// The identity provider is newEnv's, behaviour chosen by subject token.
	idp := &fakeIdP{calls: map[string]int{}}
	idp.other = httptest.NewServer(http.NotFoundHandler())
	idp.srv = httptest.NewServer(http.HandlerFunc(idp.serve))
	tb.Cleanup(func() { idp.srv.Close(); idp.other.Close() })

	tok, err := tokens.New(ctx, tokens.Options{Issuer: testIssuer, Keys: KeyStore{Store: st}})
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := New(Options{
		Store: st, Tokens: tok,
		UserInfo: userinfo.New(userinfo.Options{DefaultTimeout: 300 * time.Millisecond, MaxBody: 1 << 20}),
	})
	if err != nil {
		tb.Fatal(err)
	}
	put := func(r store.Resource, id string) {
		tb.Helper()
		r.Base().ID = id
		if _, err := st.Put(ctx, r, store.PutOptions{}); err != nil {
			tb.Fatalf("put %s: %v", id, err)
		}
	}
	put(&store.Project{Name: "P1"}, "p1")
	put(&store.Project{Name: "P2"}, "p2")
	for _, c := range []struct{ id, project, secret string }{
		{"web", "p1", ""}, {"secret-client", "p1", "s3cret"}, {"p2-client", "p2", ""},
	} {
		app := &store.ClientApplication{Name: c.id, Secret: c.secret,
			IdentityProvider: &store.IdentityProvider{UserInfoURL: idp.srv.URL + "/userinfo"}}
		app.Meta.Project = c.project
		put(app, c.id)
	}
	noIdP := &store.ClientApplication{Name: "no-idp"}
	noIdP.Meta.Project = "p1"
	put(noIdP, "no-idp")
	for _, u := range []struct{ id, email, project, profile string }{
		{"alice", "alice@example.com", "p1", "Practitioner/alice"},
		{"dave", "dave@example.com", "p2", "Patient/dave"},
	} {
		put(&store.User{Email: u.email}, u.id)
		put(&store.ProjectMembership{
			Project: store.Reference{Reference: "Project/" + u.project},
			User:    store.Reference{Reference: "User/" + u.id},
			Profile: &store.Reference{Reference: u.profile},
		}, "m-"+u.id)
	}

	e := &fuzzEnv{srv: srv, userID: "alice"}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/oauth2/token", strings.NewReader(exchangeForm("web", "alice").Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	srv.ServeToken(rec, req)
	var resp tokenResponse
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &resp) != nil {
		tb.Fatalf("setting up a sign-in: %d %s", rec.Code, rec.Body)
	}
	e.access, e.refresh, e.id = resp.AccessToken, resp.RefreshToken, resp.IDToken
	return e
}

// expand replaces the placeholders {access}, {refresh} and {id} with this
// process's live tokens, so the fuzzer can mutate around real ones.
func (e *fuzzEnv) expand(s string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	return strings.NewReplacer("{access}", e.access, "{refresh}", e.refresh, "{id}", e.id).Replace(s)
}

// oauthErrorCodes are the codes the token endpoint may answer.
var oauthErrorCodes = []string{
	errInvalidRequest, errInvalidClient, errInvalidGrant, errUnauthorizedClient,
	errUnsupportedGrantType, errInvalidScope, errUnavailable, errServerError,
}

// FuzzServeToken drives the token endpoint with arbitrary methods, content
// types, Authorization headers and bodies. It must never panic, must
// always answer RFC 6749 JSON (a token with 200, else an "error" from the
// RFC's list) with Cache-Control: no-store, and must never answer 5xx except
// 503 temporarily_unavailable, the documented identity-provider outage.
// Subject tokens select the fake provider's behaviour (see fakeIdP.serve);
// {access}, {refresh} and {id} in the body or header become live tokens.
// Seeds: testdata/fuzz/FuzzServeToken and the cases below.
func FuzzServeToken(f *testing.F) {
	e := newFuzzEnv(f)
	ex := func(client, subject string) []byte { return []byte(exchangeForm(client, subject).Encode()) }
	form := "application/x-www-form-urlencoded"
	for _, s := range []struct {
		method, contentType, auth string
		body                      []byte
	}{
		{"POST", form, "", ex("web", "alice")},
		{"POST", form, "", ex("web", "rejected")},
		{"POST", form, "", ex("web", "ratelimited")},
		{"POST", form, "", ex("web", "server-error")},
		{"POST", form, "", ex("p2-client", "alice")},
		{"POST", form, "", ex("no-idp", "alice")},
		{"POST", form, "Basic c2VjcmV0LWNsaWVudDpzM2NyZXQ=", ex("secret-client", "alice")},
		{"POST", form, "Basic %zz", ex("web", "alice")},
		{"POST", form, "", []byte("grant_type=refresh_token&refresh_token={refresh}")},
		{"POST", form, "", []byte("grant_type=refresh_token&refresh_token={access}&client_id=web")},
		{"POST", form, "", []byte("grant_type=refresh_token&refresh_token={id}")},
		{"POST", form + "; charset=utf-8", "", []byte("grant_type=password&username=a&password=b")},
		{"POST", form, "", []byte("grant_type=a&grant_type=a")},
		{"POST", form, "", []byte("grant_type=%ff")},
		{"POST", form, "", []byte("a=1;b=2")},
		{"POST", form, "", append(ex("web", "alice"), "&scope=openid%20%22x"...)},
		{"POST", form, "", append(ex("web", "alice"), "&actor_token=x&actor_token_type=y"...)},
		{"POST", "application/json", "", []byte(`{"grant_type":"refresh_token"}`)},
		{"POST", "", "", nil},
		{"GET", form, "", ex("web", "alice")},
		{"POST", "multipart/form-data; boundary=x", "", []byte("--x--")},
	} {
		f.Add(s.method, s.contentType, s.auth, s.body)
	}
	f.Fuzz(func(t *testing.T, method, contentType, auth string, body []byte) {
		if !validMethod(method) {
			return // net/http would refuse the request line before any handler
		}
		req := httptest.NewRequest("POST", "/oauth2/token", strings.NewReader(e.expand(string(body))))
		req.Method = method
		req.Header.Set("Content-Type", contentType)
		if auth != "" {
			req.Header.Set("Authorization", e.expand(auth))
		}
		rec := httptest.NewRecorder()
		e.srv.ServeToken(rec, req)

		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("Content-Type %q", ct)
		}
		if rec.Header().Get("Cache-Control") != "no-store" {
			t.Fatalf("Cache-Control %q", rec.Header().Get("Cache-Control"))
		}
		var m map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("body is not a JSON object (status %d): %q", rec.Code, rec.Body)
		}
		if rec.Code == http.StatusOK {
			if s, _ := m["access_token"].(string); s == "" {
				t.Fatalf("200 without an access_token: %s", rec.Body)
			}
			return
		}
		code, _ := m["error"].(string)
		if !slices.Contains(oauthErrorCodes, code) {
			t.Fatalf("status %d with error %q, not an RFC 6749 code: %s", rec.Code, code, rec.Body)
		}
		if rec.Code < 400 {
			t.Fatalf("error %q with status %d", code, rec.Code)
		}
		if rec.Code >= 500 && !(rec.Code == http.StatusServiceUnavailable && code == errUnavailable) {
			t.Fatalf("status %d (%s): %s", rec.Code, code, rec.Body)
		}
		if (rec.Code == http.StatusServiceUnavailable || rec.Code == http.StatusTooManyRequests) && rec.Header().Get("Retry-After") == "" {
			t.Fatalf("%d without Retry-After", rec.Code)
		}
	})
}

// FuzzAuthenticate sends arbitrary Authorization headers (several when the
// input holds newlines) to Authenticate. It must never panic, must accept
// only this deployment's live access token, byte for byte, and must refuse
// everything else with an RFC 6750 error that does not quote the header.
// {access}, {refresh} and {id} become live tokens, so the fuzzer mutates
// around real ones. Seeds: testdata/fuzz/FuzzAuthenticate and below.
func FuzzAuthenticate(f *testing.F) {
	e := newFuzzEnv(f)
	for _, s := range []string{
		"Bearer {access}",
		"bearer {access}",
		"Bearer  {access} ",
		"Bearer {refresh}",
		"Bearer {id}",
		"Bearer {access}x",
		"Bearer {access}.",
		"Bearer {access}\nBearer {access}",
		"Basic {access}",
		"Bearer",
		"Bearer ",
		"Bearer e30.e30.",
		"Bearer eyJhbGciOiJub25lIn0.e30.",
		"Bearer " + strings.Repeat("A", 9000),
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		header = e.expand(header)
		req := httptest.NewRequest("GET", "/fhir/R4/Patient/1", nil)
		for _, v := range strings.Split(header, "\n") {
			if v != "" {
				req.Header.Add("Authorization", v)
			}
		}
		id, aerr := e.srv.Authenticate(context.Background(), req)
		if aerr == nil {
			values := req.Header.Values("Authorization")
			if len(values) != 1 {
				t.Fatalf("accepted %d Authorization headers", len(values))
			}
			_, raw, _ := strings.Cut(values[0], " ")
			if strings.TrimSpace(raw) != e.access {
				t.Fatalf("accepted a token this deployment did not issue: %q", values[0])
			}
			if id == nil || id.UserID != e.userID || id.ProjectID != "p1" || id.ClientID != "web" || id.Profile != "Practitioner/alice" {
				t.Fatalf("identity %+v", id)
			}
			return
		}
		if id != nil {
			t.Fatal("identity returned with an error")
		}
		switch aerr.Code {
		case "", errInvalidToken, errInvalidRequest:
		default:
			t.Fatalf("error code %q", aerr.Code)
		}
		for _, v := range req.Header.Values("Authorization") {
			if _, tok, _ := strings.Cut(v, " "); len(tok) >= 16 && strings.Contains(aerr.Description, tok) {
				t.Fatalf("the error quotes the token: %s", aerr.Description)
			}
		}
		rec := httptest.NewRecorder()
		WriteAuthError(rec, aerr)
		if rec.Code != http.StatusUnauthorized || !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), `Bearer realm="fhirgate"`) ||
			!strings.Contains(rec.Body.String(), `"OperationOutcome"`) {
			t.Fatalf("refusal answered %d %v %s", rec.Code, rec.Header(), rec.Body)
		}
	})
}

// validMethod tells whether m is an HTTP token, as net/http requires of a
// request line's method.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range []byte(m) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

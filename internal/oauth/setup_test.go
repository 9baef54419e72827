package oauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
	"github.com/fhirgate/fhirgate/internal/tokens"
	"github.com/fhirgate/fhirgate/internal/userinfo"
)

const testIssuer = "https://gw.example.test"

// fakeIdP is a loopback identity provider whose behaviour is chosen by the
// subject token, and which counts the calls it gets per token.
type fakeIdP struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls map[string]int
	other *httptest.Server // a second host, for redirect tests
}

func newFakeIdP(t *testing.T) *fakeIdP {
	t.Helper()
	p := &fakeIdP{calls: map[string]int{}}
	p.other = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.count("other-host:" + r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"email":"alice@example.com"}`))
	}))
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() { p.srv.Close(); p.other.Close() })
	return p
}

func (p *fakeIdP) count(tok string) {
	p.mu.Lock()
	p.calls[tok]++
	p.mu.Unlock()
}

func (p *fakeIdP) callsFor(tok string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[tok]
}

func jsonUser(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(body))
}

func (p *fakeIdP) serve(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.count(tok)
	if r.URL.Path == "/userinfo-moved" {
		jsonUser(w, `{"email":"alice@example.com","email_verified":true}`)
		return
	}
	switch tok {
	case "alice", "alice-again":
		jsonUser(w, `{"sub":"idp|alice","email":"Alice@Example.com","email_verified":true}`)
	case "alice-sub":
		jsonUser(w, `{"sub":"idp|alice"}`)
	case "stranger-sub":
		jsonUser(w, `{"sub":"idp|stranger","email":"alice@example.com"}`)
	case "carol-inactive":
		jsonUser(w, `{"email":"carol@example.com","email_verified":true}`)
	case "unverified":
		jsonUser(w, `{"email":"alice@example.com","email_verified":false}`)
	case "verification-unsaid":
		jsonUser(w, `{"email":"alice@example.com"}`)
	case "nobody":
		jsonUser(w, `{"email":"nobody@example.com","email_verified":true}`)
	case "dave-other-project":
		jsonUser(w, `{"email":"dave@example.com","email_verified":true}`)
	case "no-email":
		jsonUser(w, `{"sub":"x"}`)
	case "jwt":
		payload := base64.RawURLEncoding.EncodeToString([]byte(`{"email":"alice@example.com","email_verified":true}`))
		w.Header().Set("Content-Type", "application/jwt")
		_, _ = w.Write([]byte("eyJhbGciOiJSUzI1NiJ9." + payload + ".c2ln"))
	case "rejected":
		w.WriteHeader(http.StatusUnauthorized)
	case "forbidden":
		w.WriteHeader(http.StatusForbidden)
	case "ratelimited":
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
	case "server-error":
		w.WriteHeader(http.StatusInternalServerError)
	case "html":
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>maintenance</html>"))
	case "empty":
		w.Header().Set("Content-Type", "application/json")
	case "huge":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"email":"alice@example.com","pad":"` + strings.Repeat("x", 2<<20) + `"}`))
	case "slow":
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	case "hang-body":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"email":`))
		w.(http.Flusher).Flush()
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	case "redirect-same":
		http.Redirect(w, r, "/userinfo-moved?tok=alice", http.StatusFound)
	case "redirect-other":
		http.Redirect(w, r, p.other.URL+"/userinfo", http.StatusFound)
	default:
		w.WriteHeader(http.StatusUnauthorized)
	}
}

// env is an oauth.Server over a real store, token service and userinfo
// client, with a project "p1" holding clients and people, and a project
// "p2" holding someone else.
type env struct {
	t   *testing.T
	st  *store.Store
	tok *tokens.Service
	srv *Server
	idp *fakeIdP
	now time.Time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t)
}

// newEnvWith is newEnv over a store opened with opts.
func newEnvWith(t *testing.T, opts ...storetest.Option) *env {
	t.Helper()
	e := &env{t: t, st: storetest.Open(t, opts...), idp: newFakeIdP(t)}
	ctx := context.Background()
	var err error
	e.tok, err = tokens.New(ctx, tokens.Options{Issuer: testIssuer, Keys: KeyStore{Store: e.st}})
	if err != nil {
		t.Fatal(err)
	}
	e.srv, err = New(Options{
		Store: e.st, Tokens: e.tok,
		UserInfo: userinfo.New(userinfo.Options{DefaultTimeout: 300 * time.Millisecond, MaxBody: 1 << 20}),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.put(&store.Project{Name: "P1"}, "p1")
	e.put(&store.Project{Name: "P2"}, "p2")
	e.client("web", "p1", false, "")
	e.client("sub-client", "p1", true, "")
	e.client("secret-client", "p1", false, "s3cret")
	e.client("p2-client", "p2", false, "")
	noIdP := &store.ClientApplication{Name: "no-idp"}
	noIdP.Meta.Project = "p1"
	e.put(noIdP, "no-idp")

	alice := e.user("alice@example.com")
	e.membership("p1", alice, "Practitioner/alice", "idp|alice", nil)
	inactive := false
	carol := e.user("carol@example.com")
	e.membership("p1", carol, "Practitioner/carol", "", &inactive)
	dave := e.user("dave@example.com")
	e.membership("p2", dave, "Patient/dave", "", nil)
	return e
}

func (e *env) put(r store.Resource, id string) {
	e.t.Helper()
	r.Base().ID = id
	if _, err := e.st.Put(context.Background(), r, store.PutOptions{}); err != nil {
		e.t.Fatalf("put %s: %v", id, err)
	}
}

func (e *env) client(id, project string, useSubject bool, secret string) {
	c := &store.ClientApplication{
		Name:             id,
		Secret:           secret,
		IdentityProvider: &store.IdentityProvider{UserInfoURL: e.idp.srv.URL + "/userinfo", UseSubject: useSubject},
	}
	c.Meta.Project = project
	e.put(c, id)
}

func (e *env) user(email string) string {
	e.t.Helper()
	u := &store.User{Email: email}
	if err := e.st.Create(context.Background(), u, store.PutOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return u.ID
}

func (e *env) membership(project, userID, profile, externalID string, active *bool) {
	e.t.Helper()
	m := &store.ProjectMembership{
		Project:    store.Reference{Reference: "Project/" + project},
		User:       store.Reference{Reference: "User/" + userID},
		Profile:    &store.Reference{Reference: profile},
		ExternalID: externalID,
		Active:     active,
	}
	if err := e.st.Create(context.Background(), m, store.PutOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// post sends a form to one of the server's endpoints.
func (e *env) post(h http.HandlerFunc, form url.Values, basicUser, basicPass string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/oauth2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basicUser != "" {
		req.SetBasicAuth(basicUser, basicPass)
	}
	rec := httptest.NewRecorder()
	h(rec, req)
	return rec
}

func exchangeForm(client, subject string) url.Values {
	return url.Values{
		"grant_type":         {grantTokenExchange},
		"client_id":          {client},
		"subject_token":      {subject},
		"subject_token_type": {tokenTypeAccess},
	}
}

func (e *env) exchange(client, subject string) *httptest.ResponseRecorder {
	return e.post(e.srv.ServeToken, exchangeForm(client, subject), "", "")
}

func fail(t *testing.T, rec *httptest.ResponseRecorder, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s (status %d, body %s)", fmt.Sprintf(format, args...), rec.Code, rec.Body)
}

// signedIn is a token exchange's tokens.
type signedIn struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
}

// signIn exchanges subject through client, failing the test if it is refused.
func (e *env) signIn(t *testing.T, client, subject string) signedIn {
	t.Helper()
	rec := e.exchange(client, subject)
	if rec.Code != 200 {
		fail(t, rec, "exchange refused")
	}
	var tok signedIn
	if err := json.Unmarshal(rec.Body.Bytes(), &tok); err != nil {
		t.Fatal(err)
	}
	return tok
}

package oauth

import (
	"context"
	"encoding/base64"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
)

// TestLogoutRevokesAccessAndRefreshTokens: /oauth2/logout ends the
// sign-in; its access token is refused at once and its refresh token
// cannot be used.
func TestLogoutRevokesAccessAndRefreshTokens(t *testing.T) {
	e := newEnv(t)
	tok := e.signIn(t, "web", "alice")
	req := httptest.NewRequest("POST", "/oauth2/logout", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	id, aerr := e.srv.Authenticate(context.Background(), req)
	if aerr != nil {
		t.Fatal(aerr)
	}
	out := httptest.NewRecorder()
	e.srv.ServeLogout(out, req, id)
	if out.Code != 200 || !strings.Contains(out.Body.String(), `"All OK"`) || !strings.Contains(out.Body.String(), "OperationOutcome") {
		fail(t, out, "logout answer")
	}
	if _, aerr := e.srv.Authenticate(context.Background(), req); aerr == nil || aerr.Reason != "revoked" {
		t.Fatalf("the access token still authenticates after logout: %v", aerr)
	}
	ref := e.post(e.srv.ServeToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "client_id": {"web"}}, "", "")
	if ref.Code != 400 || !strings.Contains(ref.Body.String(), errInvalidGrant) {
		fail(t, ref, "refresh after logout")
	}
}

// TestBasicIdentityIsTheClientsMembership: Basic credentials authenticate
// as the client's membership, a wrong or retired secret does not, and the
// cached identity is dropped when the client is written.
func TestBasicIdentityIsTheClientsMembership(t *testing.T) {
	e := newEnv(t)
	e.machine("ci", func(c *store.ClientApplication) { c.Secret = "new-secret-value" }, true)
	basic := func(user, pass string) (*Identity, *AuthError) {
		r := httptest.NewRequest("GET", "/fhir/R4/Patient", nil)
		r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
		return e.srv.AuthenticateBasic(context.Background(), r)
	}
	for range 2 { // the second is served from the cache
		id, aerr := basic("ci", "new-secret-value")
		if aerr != nil {
			t.Fatal(aerr)
		}
		if id.ClientID != "ci" || id.Profile != "ClientApplication/ci" || !id.Admin || id.ProjectID != "p1" {
			t.Fatalf("identity %+v", id)
		}
	}
	if _, aerr := basic("ci", "wrong"); aerr == nil {
		t.Fatal("a wrong secret authenticated")
	}
	// Rotate: the old secret stops working at once on this gateway.
	c, err := store.Get[store.ClientApplication](context.Background(), e.st, "ci")
	if err != nil {
		t.Fatal(err)
	}
	c.Secret = "rotated-secret-value"
	if _, err := e.st.Put(context.Background(), c, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, aerr := basic("ci", "new-secret-value"); aerr == nil {
		t.Fatal("the replaced secret still authenticates from the cache")
	}
	if _, aerr := basic("ci", "rotated-secret-value"); aerr != nil {
		t.Fatal(aerr)
	}
}

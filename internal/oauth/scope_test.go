package oauth

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
)

// scopedClient adds a client of project allowed scope.
func (e *env) scopedClient(id, project, scope string) {
	e.t.Helper()
	c := &store.ClientApplication{
		Name: id, Scope: scope,
		IdentityProvider: &store.IdentityProvider{UserInfoURL: e.idp.srv.URL + "/userinfo"},
	}
	c.Meta.Project = project
	e.put(c, id)
}

func (e *env) exchangeScope(client, subject, scope string) *httptest.ResponseRecorder {
	f := exchangeForm(client, subject)
	if scope != "" {
		f.Set("scope", scope)
	}
	return e.post(e.srv.ServeToken, f, "", "")
}

func (e *env) refreshScope(client, refreshToken, scope string) *httptest.ResponseRecorder {
	f := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}, "client_id": {client}}
	if scope != "" {
		f.Set("scope", scope)
	}
	return e.post(e.srv.ServeToken, f, "", "")
}

// checkGranted checks a token response's scope and patient against the
// access token's claims.
func checkGranted(t *testing.T, e *env, rec *httptest.ResponseRecorder, wantScope, wantPatient string) map[string]any {
	t.Helper()
	if rec.Code != 200 {
		fail(t, rec, "token request failed")
	}
	body := decode(t, rec)
	if body["scope"] != wantScope {
		fail(t, rec, "scope %q, want %q", body["scope"], wantScope)
	}
	claims, err := e.tok.Verify(context.Background(), body["access_token"].(string), tokens.KindAccess)
	if err != nil {
		t.Fatal(err)
	}
	if claims.Scope != wantScope {
		t.Fatalf("access token scope %q, want %q", claims.Scope, wantScope)
	}
	patient, _ := body["patient"].(string)
	if patient != wantPatient || claims.Patient != wantPatient {
		fail(t, rec, "patient: response %q, token %q; want %q", patient, claims.Patient, wantPatient)
	}
	intro := decode(t, e.post(e.srv.ServeIntrospect, url.Values{"token": {body["access_token"].(string)}, "client_id": {claims.ClientID}}, "", ""))
	introPatient, _ := intro["patient"].(string)
	if intro["active"] != true || intro["scope"] != wantScope || introPatient != wantPatient {
		t.Fatalf("introspection %v: want scope %q, patient %q", intro, wantScope, wantPatient)
	}
	id, aerr := e.authenticate(body["access_token"].(string))
	if aerr != nil || id.Scope != wantScope || id.Patient != wantPatient {
		t.Fatalf("identity %+v (%v): want scope %q, patient %q", id, aerr, wantScope, wantPatient)
	}
	return body
}

func TestExchangeGrantsRequestedScopeWithinTheClients(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, allowed, subject, requested string
		project                           string
		want, wantPatient                 string // want "" = invalid_scope
		wantRefresh                       bool
	}{
		{name: "no allowed, no request: full access", subject: "alice", want: "openid offline", wantRefresh: true},
		{name: "no allowed: request granted as asked", subject: "alice", requested: "openid user/Observation.rs", want: "openid user/Observation.rs"},
		{name: "allowed, no request: the client's scopes", allowed: "openid offline user/Observation.rs", subject: "alice", want: "openid offline user/Observation.rs", wantRefresh: true},
		{name: "wider request narrowed to allowed", allowed: "openid offline user/Observation.rs", subject: "alice", requested: "offline user/*.cruds", want: "offline user/Observation.rs", wantRefresh: true},
		{name: "v1 request within v2 allowed", allowed: "user/*.rs", subject: "alice", requested: "user/*.read", want: "user/*.read"},
		{name: "offline not allowed: no refresh token", allowed: "openid user/*.rs", subject: "alice", requested: "openid offline user/*.r", want: "openid user/*.r"},
		{name: "nothing requested is allowed", allowed: "user/Observation.rs", subject: "alice", requested: "user/Patient.r"},
		{name: "bad permission letters", subject: "alice", requested: "user/Observation.xyz"},
		{name: "only unknown tokens", subject: "alice", requested: "admin/*.cruds"},
		{name: "unknown tokens dropped", subject: "alice", requested: "admin/*.cruds openid", want: "openid"},
		{name: "practitioner with patient scopes: no patient context", subject: "alice", requested: "patient/*.rs", want: "patient/*.rs"},
		{name: "patient profile, full access: no patient context", project: "p2", subject: "dave-other-project", want: "openid offline", wantRefresh: true},
		{name: "patient profile with patient scopes", project: "p2", subject: "dave-other-project", requested: "openid patient/Observation.rs", want: "openid patient/Observation.rs", wantPatient: "dave"},
		{name: "patient profile with launch/patient", project: "p2", subject: "dave-other-project", requested: "launch/patient user/Observation.rs", want: "launch/patient user/Observation.rs", wantPatient: "dave"},
		{name: "patient profile, allowed patient scopes, no request", project: "p2", allowed: "offline_access patient/*.rs", subject: "dave-other-project", want: "patient/*.rs", wantPatient: "dave"},
		{name: "patient profile, user scopes only", project: "p2", subject: "dave-other-project", requested: "user/Observation.rs", want: "user/Observation.rs"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			project := tt.project
			if project == "" {
				project = "p1"
			}
			client := "scoped-" + string(rune('a'+i))
			e.scopedClient(client, project, tt.allowed)
			rec := e.exchangeScope(client, tt.subject, tt.requested)
			if tt.want == "" {
				if rec.Code != 400 || decode(t, rec)["error"] != "invalid_scope" {
					fail(t, rec, "want invalid_scope")
				}
				return
			}
			body := checkGranted(t, e, rec, tt.want, tt.wantPatient)
			if _, ok := body["refresh_token"]; ok != tt.wantRefresh {
				fail(t, rec, "refresh_token present %v, want %v", ok, tt.wantRefresh)
			}
		})
	}
}

func TestRefreshKeepsTheGrantAndNeverWidensIt(t *testing.T) {
	e := newEnv(t)
	e.scopedClient("narrow", "p2", "")
	const original = "openid offline patient/Observation.rs patient/Patient.r"
	first := checkGranted(t, e, e.exchangeScope("narrow", "dave-other-project", original), original, "dave")
	rt := first["refresh_token"].(string)
	next := func(rec *httptest.ResponseRecorder, scope, patient string) {
		t.Helper()
		rt = checkGranted(t, e, rec, scope, patient)["refresh_token"].(string)
	}

	next(e.refreshScope("narrow", rt, ""), original, "dave")
	next(e.refreshScope("narrow", rt, "patient/Observation.r"), "patient/Observation.r", "dave")
	// The narrowing was for that token only: the sign-in keeps its grant.
	next(e.refreshScope("narrow", rt, ""), original, "dave")
	next(e.refreshScope("narrow", rt, "offline patient/Observation.s"), "offline patient/Observation.s", "dave")

	for _, widen := range []string{
		"patient/*.rs",            // another type
		"patient/Observation.cru", // more permissions
		"user/Observation.rs",     // a wider context
		"openid email",            // a token never granted
	} {
		rec := e.refreshScope("narrow", rt, widen)
		if rec.Code != 400 || decode(t, rec)["error"] != "invalid_scope" {
			fail(t, rec, "refresh widened to %q", widen)
		}
	}
	if rec := e.refreshScope("narrow", rt, "patient/Observation.x"); rec.Code != 400 || decode(t, rec)["error"] != "invalid_scope" {
		fail(t, rec, "bad syntax on refresh")
	}

	// Narrowing the client narrows its sign-ins at their next refresh.
	e.scopedClient("narrow", "p2", "openid offline patient/Observation.r")
	next(e.refreshScope("narrow", rt, ""), "openid offline patient/Observation.r", "dave")
}

func TestRefreshOfAFullGrantMayNarrowToAnyScope(t *testing.T) {
	e := newEnv(t)
	first := checkGranted(t, e, e.exchange("web", "alice"), "openid offline", "")
	checkGranted(t, e, e.refreshScope("web", first["refresh_token"].(string), "user/Patient.r"), "user/Patient.r", "")
}

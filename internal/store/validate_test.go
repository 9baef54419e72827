package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	p := seedProject(t, s, "p")
	u := seedUser(t, s, "u@example.com")
	inProject := func() base { return Base{Meta: Meta{Project: p.ID}} }
	pref, uref := Reference{Reference: "Project/" + p.ID}, Reference{Reference: "User/" + u.ID}

	tests := []struct {
		name      string
		r         Resource
		wantField string
		wantMsg   string // substring of the message
	}{
		{name: "project name required", r: &Project{}, wantField: "name", wantMsg: "required"},
		{name: "project secret name required", r: &Project{Name: "p", Secret: []ProjectSetting{{ValueString: "x"}}}, wantField: "secret[0].name"},
		{name: "project egress entry", r: &Project{Name: "p", Egress: &ProjectEgress{AllowHTTP: []string{"http://api.example.com"}}}, wantField: "egress.allowHttp", wantMsg: "'http://api.example.com'"},
		{name: "client needs project", r: &ClientApplication{Name: "c"}, wantField: "meta.project", wantMsg: "required"},
		{name: "client project must exist", r: &ClientApplication{base: Base{Meta: Meta{Project: "nope"}}}, wantField: "meta.project", wantMsg: "Project/nope does not exist"},
		{name: "client lifetime format", r: &ClientApplication{base: inProject(), AccessTokenLifetime: "1 hour"}, wantField: "accessTokenLifetime"},
		{name: "client scope characters", r: &ClientApplication{base: inProject(), Scope: `user/*.rs "openid"`}, wantField: "scope", wantMsg: "RFC 6749"},
		{name: "client scope backslash", r: &ClientApplication{base: inProject(), Scope: `user/Patient.r\\`}, wantField: "scope", wantMsg: "RFC 6749"},
		{name: "client scope grammar", r: &ClientApplication{base: inProject(), Scope: "openid user/Observation.xyz"}, wantField: "scope", wantMsg: "invalid scope"},
		{name: "client refresh lifetime format", r: &ClientApplication{base: inProject(), RefreshTokenLifetime: "2x"}, wantField: "refreshTokenLifetime"},
		{name: "idp url required", r: &ClientApplication{base: inProject(), IdentityProvider: &IdentityProvider{}}, wantField: "identityProvider.userInfoUrl", wantMsg: "required"},
		{name: "idp url scheme", r: &ClientApplication{base: inProject(), IdentityProvider: &IdentityProvider{UserInfoURL: "ftp://x/y"}}, wantField: "identityProvider.userInfoUrl"},
		{name: "idp url relative", r: &ClientApplication{base: inProject(), IdentityProvider: &IdentityProvider{UserInfoURL: "/userinfo"}}, wantField: "identityProvider.userInfoUrl"},
		{name: "idp jwks without issuer", r: &ClientApplication{base: inProject(), IdentityProvider: &IdentityProvider{JWKSURI: "https://x/jwks", Audience: []string{"a"}}}, wantField: "identityProvider.issuer", wantMsg: "required"},
		{name: "idp jwks without audience", r: &ClientApplication{base: inProject(), IdentityProvider: &IdentityProvider{JWKSURI: "https://x/jwks", Issuer: "https://x/"}}, wantField: "identityProvider.audience", wantMsg: "required"},
		{name: "idp jwks url scheme", r: &ClientApplication{base: inProject(), IdentityProvider: &IdentityProvider{JWKSURI: "file:///k", Issuer: "i", Audience: []string{"a"}}}, wantField: "identityProvider.jwksUri"},
		{name: "idp issuer without jwks", r: &ClientApplication{base: inProject(), IdentityProvider: &IdentityProvider{UserInfoURL: "https://x/u", Issuer: "i"}}, wantField: "identityProvider.jwksUri"},
		{name: "idp jwks with a bad userinfo url", r: &ClientApplication{base: inProject(), IdentityProvider: &IdentityProvider{UserInfoURL: "/u", JWKSURI: "https://x/jwks", Issuer: "i", Audience: []string{"a"}}}, wantField: "identityProvider.userInfoUrl"},
		{name: "idp timeout", r: &ClientApplication{base: inProject(), IdentityProvider: &IdentityProvider{UserInfoURL: "https://x/u", Timeout: "5"}}, wantField: "identityProvider.timeout"},
		{name: "idp zero timeout", r: &ClientApplication{base: inProject(), IdentityProvider: &IdentityProvider{UserInfoURL: "https://x/u", Timeout: "0s"}}, wantField: "identityProvider.timeout"},
		{name: "idp cache ttl", r: &ClientApplication{base: inProject(), IdentityProvider: &IdentityProvider{UserInfoURL: "https://x/u", CacheTTL: "1d"}}, wantField: "identityProvider.cacheTtl"},
		{name: "user email required", r: &User{}, wantField: "email", wantMsg: "required"},
		{name: "user email syntax", r: &User{Email: "not-an-email"}, wantField: "email"},
		{name: "user email with display name", r: &User{Email: "Bob <bob@example.com>"}, wantField: "email"},
		{name: "membership project required", r: &ProjectMembership{User: uref}, wantField: "project.reference", wantMsg: "required"},
		{name: "membership project type", r: &ProjectMembership{Project: Reference{Reference: "User/" + u.ID}, User: uref}, wantField: "project.reference"},
		{name: "membership project exists", r: &ProjectMembership{Project: Reference{Reference: "Project/nope"}, User: uref}, wantField: "project.reference", wantMsg: "does not exist"},
		{name: "membership user syntax", r: &ProjectMembership{Project: pref, User: Reference{Reference: "User/"}}, wantField: "user.reference"},
		{name: "membership user exists", r: &ProjectMembership{Project: pref, User: Reference{Reference: "User/nope"}}, wantField: "user.reference", wantMsg: "does not exist"},
		{name: "membership profile type", r: &ProjectMembership{Project: pref, User: uref, Profile: &Reference{Reference: "Observation/1"}}, wantField: "profile.reference"},
		{name: "membership access policy type", r: &ProjectMembership{Project: pref, User: uref, AccessPolicy: &Reference{Reference: "Bot/1"}}, wantField: "accessPolicy.reference"},
		{name: "bot name required", r: &Bot{base: inProject()}, wantField: "name", wantMsg: "required"},
		{name: "bot project required", r: &Bot{Name: "b"}, wantField: "meta.project"},
		{name: "bot project exists", r: &Bot{base: Base{Meta: Meta{Project: "nope"}}, Name: "b"}, wantField: "meta.project", wantMsg: "does not exist"},
		{name: "bot identifier value", r: &Bot{base: inProject(), Name: "b", Identifier: []Identifier{{Value: "ok"}, {System: "s"}}}, wantField: "identifier[1].value"},
		{name: "bot runtime", r: &Bot{base: inProject(), Name: "b", RuntimeVersion: "fhirgate"}, wantField: "runtimeVersion", wantMsg: "awslambda, vmcontext"},
		{name: "bot timeout high", r: &Bot{base: inProject(), Name: "b", Timeout: 901}, wantField: "timeout"},
		{name: "bot timeout negative", r: &Bot{base: inProject(), Name: "b", Timeout: -1}, wantField: "timeout"},
		{name: "bot source url", r: &Bot{base: inProject(), Name: "b", SourceCode: &Attachment{URL: "https://x/code.ts"}}, wantField: "sourceCode.url"},
		{name: "bot executable url", r: &Bot{base: inProject(), Name: "b", ExecutableCode: &Attachment{URL: "Binary/"}}, wantField: "executableCode.url"},
		{name: "bot audit trigger", r: &Bot{base: inProject(), Name: "b", AuditEventTrigger: "sometimes"}, wantField: "auditEventTrigger"},
		{name: "binary content type", r: &Binary{Data: "eA=="}, wantField: "contentType"},
		{name: "binary base64", r: &Binary{ContentType: "text/plain", Data: "not base64!"}, wantField: "data"},
		{name: "binary project exists", r: &Binary{base: Base{Meta: Meta{Project: "nope"}}, ContentType: "text/plain"}, wantField: "meta.project"},
		{name: "login user required", r: &Login{}, wantField: "user.reference"},
		{name: "login membership type", r: &Login{User: uref, Membership: Reference{Reference: "Project/x"}}, wantField: "membership.reference"},
		{name: "login auth time", r: &Login{User: uref, AuthTime: "yesterday"}, wantField: "authTime"},
		{name: "audit outcome", r: &AuditEvent{Outcome: "1"}, wantField: "outcome"},
		{name: "audit recorded", r: &AuditEvent{Recorded: "noon"}, wantField: "recorded"},
		{name: "audit period", r: &AuditEvent{Period: &Period{Start: "x"}}, wantField: "period.start"},
		{name: "jwk alg", r: &JSONWebKey{Kty: "EC"}, wantField: "alg"},
		{name: "jwk kty", r: &JSONWebKey{Alg: "ES256"}, wantField: "kty"},
		{name: "jwk retired", r: &JSONWebKey{Alg: "ES256", Kty: "EC", Retired: "soon"}, wantField: "retired"},
		{name: "async job status", r: &AsyncJob{Status: "done", Request: "/x"}, wantField: "status"},
		{name: "async job request", r: &AsyncJob{Status: "active"}, wantField: "request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Create(ctx, tc.r, PutOptions{})
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error = %v, want a *ValidationError", err)
			}
			if ve.Field != tc.wantField || !strings.Contains(ve.Message, tc.wantMsg) {
				t.Fatalf("error = %q (field %q), want field %q with %q", err, ve.Field, tc.wantField, tc.wantMsg)
			}
			if !strings.Contains(err.Error(), tc.wantField+": ") {
				t.Fatalf("error text %q does not name the field", err)
			}
		})
	}

	t.Run("client scope stored with single spaces", func(t *testing.T) {
		c := &ClientApplication{base: inProject(), Scope: " openid\tuser/*.rs   launch/patient "}
		if err := s.Create(ctx, c, PutOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := Get[ClientApplication](ctx, s, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Scope != "openid user/*.rs launch/patient" {
			t.Fatalf("stored scope = %q", got.Scope)
		}
	})

	t.Run("put needs a valid id", func(t *testing.T) {
		_, err := s.Put(ctx, &Project{base: Base{ID: "has/slash"}, Name: "p"}, PutOptions{})
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "id" {
			t.Fatalf("error = %v, want an id ValidationError", err)
		}
	})
}

func TestParseLifetime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "30s", want: 30 * time.Second},
		{in: "1h", want: time.Hour},
		{in: "30d", want: 30 * 24 * time.Hour},
		{in: "2w", want: 14 * 24 * time.Hour},
		{in: "1y", want: 365 * 24 * time.Hour},
		{in: "", wantErr: true},
		{in: "1h30m", wantErr: true},
		{in: "-1h", wantErr: true},
		{in: "h", wantErr: true},
		{in: "99999999999999y", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseLifetime(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("ParseLifetime(%q) = %v, %v", tc.in, got, err)
			}
		})
	}
}

func TestIndexedStringsAreBounded(t *testing.T) {
	st := newTestStore(t)
	ctx := context.Background()
	long := strings.Repeat("x", MaxIndexedLength+1)
	p := &Project{Name: "p"}
	p.ID = "p"
	if _, err := st.Put(ctx, p, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	bot := &Bot{Name: "b", Identifier: []Identifier{{System: "s", Value: long}}}
	bot.Meta.Project = "p"
	tests := []struct {
		name  string
		r     Resource
		field string
	}{
		{"bot identifier value", bot, "identifier[0].value"},
		{"user email", &User{Email: long + "@example.com"}, "email"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := st.Create(ctx, tt.r, PutOptions{})
			var verr *ValidationError
			if !errors.As(err, &verr) || verr.Field != tt.field {
				t.Fatalf("err = %v, want a validation error on %s", err, tt.field)
			}
		})
	}
}

// TestIDAndReferenceSyntax pins the hand-written checks to the grammars they
// implement, including the edges a loop gets wrong (length bounds, the first
// character of a type, bytes beyond ASCII).
func TestIDAndReferenceSyntax(t *testing.T) {
	t.Parallel()
	id64 := strings.Repeat("a", 64)
	type64 := "A" + strings.Repeat("b", 63)
	tests := []struct {
		ref      string
		wantType string
		wantID   string // empty: the reference is refused
	}{
		{"Bot/0195f1b2-aaaa-7bbb-8ccc-123456789abc", "Bot", "0195f1b2-aaaa-7bbb-8ccc-123456789abc"},
		{"Patient/a.B-9", "Patient", "a.B-9"},
		{"X/1", "X", "1"},
		{type64 + "/" + id64, type64, id64},
		{type64 + "b/1", "", ""},
		{"Bot/" + id64 + "a", "", ""},
		{"Bot/", "", ""},
		{"/1", "", ""},
		{"bot/1", "", ""},
		{"B0t/1", "", ""},
		{"Bot/1/2", "", ""},
		{"Bot/a_b", "", ""},
		{"Bot/a b", "", ""},
		{"Bot/é", "", ""},
		{"Bét/1", "", ""},
		{"Bot", "", ""},
		{"", "", ""},
	}
	for _, tc := range tests {
		typ, id, err := ParseReference(tc.ref)
		if tc.wantID == "" {
			if err == nil {
				t.Errorf("ParseReference(%q) = %q, %q; want an error", tc.ref, typ, id)
			}
			continue
		}
		if err != nil || typ != tc.wantType || id != tc.wantID {
			t.Errorf("ParseReference(%q) = %q, %q, %v; want %q, %q", tc.ref, typ, id, err, tc.wantType, tc.wantID)
		}
	}
	for _, id := range []string{"a", id64, "0.-Z"} {
		if !ValidID(id) {
			t.Errorf("ValidID(%q) = false", id)
		}
	}
	for _, id := range []string{"", id64 + "a", "a/b", "a\x00", "ä", "a+b"} {
		if ValidID(id) {
			t.Errorf("ValidID(%q) = true", id)
		}
	}
}

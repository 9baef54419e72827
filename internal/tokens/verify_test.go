package tokens

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"maps"
)

func TestIssuedTokensVerifyAsTheirOwnKind(t *testing.T) {
	e := newEnv(t, Options{})
	now := e.clock.Now()
	authTime := now.Add(-time.Minute)
	cases := []struct {
		name       string
		issue      func() (string, time.Time, error)
		kind       Kind
		typ        string
		wantClaims []string // exactly the payload's claim names
		check      func(t *testing.T, c *Claims)
	}{
		{
			name: "access",
			issue: func() (string, time.Time, error) {
				return e.svc.IssueAccess(AccessClaims{Sub: "u1", ClientID: "c1", LoginID: "l1", Profile: "Practitioner/123", Scope: "openid offline"}, time.Hour)
			},
			kind:       KindAccess,
			typ:        "at+jwt",
			wantClaims: []string{"aud", "client_id", "exp", "iat", "iss", "jti", "login_id", "nbf", "profile", "scope", "sub", "username"},
			check: func(t *testing.T, c *Claims) {
				if c.Subject != "u1" || c.Username != "u1" || c.Audience != "c1" || c.ClientID != "c1" ||
					c.LoginID != "l1" || c.Profile != "Practitioner/123" || c.Scope != "openid offline" {
					t.Errorf("claims %+v", c)
				}
			},
		},
		{
			name: "refresh",
			issue: func() (string, time.Time, error) {
				return e.svc.IssueRefresh(RefreshClaims{ClientID: "c1", LoginID: "l1", RefreshSecret: "s3cret"}, 14*24*time.Hour)
			},
			kind:       KindRefresh,
			typ:        "JWT",
			wantClaims: []string{"aud", "client_id", "exp", "iat", "iss", "jti", "login_id", "refresh_secret"},
			check: func(t *testing.T, c *Claims) {
				if c.RefreshSecret != "s3cret" || c.LoginID != "l1" || c.ClientID != "c1" || c.Subject != "" {
					t.Errorf("claims %+v", c)
				}
			},
		},
		{
			name: "id",
			issue: func() (string, time.Time, error) {
				return e.svc.IssueID(IDClaims{Sub: "u1", ClientID: "c1", LoginID: "l1", FHIRUser: "Practitioner/123", Email: "a@b.test", Nonce: "n1", AuthTime: authTime}, time.Hour)
			},
			kind:       KindID,
			typ:        "JWT",
			wantClaims: []string{"aud", "auth_time", "client_id", "email", "exp", "fhirUser", "iat", "iss", "jti", "login_id", "nbf", "nonce", "sub"},
			check: func(t *testing.T, c *Claims) {
				if c.Subject != "u1" || c.FHIRUser != "Practitioner/123" || c.Email != "a@b.test" || c.Nonce != "n1" ||
					!c.AuthTime.Equal(authTime.Truncate(time.Second)) {
					t.Errorf("claims %+v", c)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok, exp, err := tc.issue()
			if err != nil {
				t.Fatal(err)
			}
			hdr := decodePart(t, tok, 0)
			if hdr["alg"] != "ES256" || hdr["typ"] != tc.typ || hdr["kid"] != e.svc.SigningKeyID() || hdr["low_s"] != true || len(hdr) != 4 {
				t.Errorf("header %v", hdr)
			}
			if got := slices.Sorted(maps.Keys(decodePart(t, tok, 1))); !slices.Equal(got, tc.wantClaims) {
				t.Errorf("claims %v, want %v", got, tc.wantClaims)
			}
			c, err := e.svc.Verify(context.Background(), tok, tc.kind)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if c.Kind != tc.kind || c.Issuer != testIssuer || c.KeyID != e.svc.SigningKeyID() || c.ID == "" {
				t.Errorf("claims %+v", c)
			}
			if !c.ExpiresAt.Equal(exp) || !c.IssuedAt.Equal(now) {
				t.Errorf("iat %v exp %v, want %v %v", c.IssuedAt, c.ExpiresAt, now, exp)
			}
			tc.check(t, c)
		})
	}
}

func TestIssueRejectsBadInput(t *testing.T) {
	e := newEnv(t, Options{MaxTokenLifetime: 48 * time.Hour})
	good := AccessClaims{Sub: "u", LoginID: "l"}
	cases := []struct {
		name  string
		issue func() error
	}{
		{"access without sub", func() error { _, _, err := e.svc.IssueAccess(AccessClaims{LoginID: "l"}, time.Hour); return err }},
		{"access without login", func() error { _, _, err := e.svc.IssueAccess(AccessClaims{Sub: "u"}, time.Hour); return err }},
		{"zero lifetime", func() error { _, _, err := e.svc.IssueAccess(good, 0); return err }},
		{"lifetime beyond max", func() error { _, _, err := e.svc.IssueAccess(good, 49*time.Hour); return err }},
		{"refresh without secret", func() error { _, _, err := e.svc.IssueRefresh(RefreshClaims{LoginID: "l"}, time.Hour); return err }},
		{"id without sub", func() error { _, _, err := e.svc.IssueID(IDClaims{LoginID: "l"}, time.Hour); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.issue(); err == nil {
				t.Fatal("issued, want error")
			}
		})
	}
}

func TestTokensStayInTheirLane(t *testing.T) {
	e := newEnv(t, Options{})
	access := e.access(t, time.Hour)
	refresh, _, err := e.svc.IssueRefresh(RefreshClaims{ClientID: "c", LoginID: "l", RefreshSecret: "s"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := e.svc.IssueID(IDClaims{Sub: "u", ClientID: "c", LoginID: "l"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		token string
		as    Kind
	}{
		{"refresh as access", refresh, KindAccess},
		{"id as access", id, KindAccess},
		{"access as refresh", access, KindRefresh},
		{"access as id", access, KindID},
		{"id as refresh", id, KindRefresh},
		{"refresh as id", refresh, KindID},
		{"unknown kind", access, Kind(0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.Verify(context.Background(), tc.token, tc.as)
			wantReason(t, err, ReasonType)
		})
	}
}

func TestClockSkewToleratedOnlyForIatAndNbf(t *testing.T) {
	e := newEnv(t, Options{})
	priv := e.signer(t).Private
	now := e.clock.Now()
	kid := e.svc.SigningKeyID()
	cases := []struct {
		name   string
		mutate func(c map[string]any)
		want   Reason // "" = accepted
	}{
		{"iat and nbf within skew", func(c map[string]any) {
			c["iat"], c["nbf"] = now.Add(20*time.Second).Unix(), now.Add(20*time.Second).Unix()
		}, ""},
		{"nbf beyond skew", func(c map[string]any) { c["nbf"] = now.Add(2 * time.Minute).Unix() }, ReasonNotYetValid},
		{"iat beyond skew", func(c map[string]any) { c["iat"] = now.Add(2 * time.Minute).Unix() }, ReasonNotYetValid},
		{"exp now", func(c map[string]any) { c["exp"] = now.Unix() }, ReasonExpired},
		{"exp one second ahead", func(c map[string]any) { c["exp"] = now.Add(time.Second).Unix() }, ""},
		{"fractional dates", func(c map[string]any) { c["iat"] = float64(now.Unix()) + 0.5; c["exp"] = float64(now.Unix()) + 60.25 }, ""},
		{"no exp", func(c map[string]any) { delete(c, "exp") }, ReasonMalformed},
		{"no iat", func(c map[string]any) { delete(c, "iat") }, ReasonMalformed},
		{"exp as string", func(c map[string]any) { c["exp"] = "tomorrow" }, ReasonMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claims := validClaims(now)
			tc.mutate(claims)
			tok := signES256(t, priv, accessHeader(kid), claims)
			_, err := e.svc.Verify(context.Background(), tok, KindAccess)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			wantReason(t, err, tc.want)
		})
	}
}

func TestVerifyAcceptsRFC9068MediaTypeSpelling(t *testing.T) {
	e := newEnv(t, Options{})
	now := e.clock.Now()
	for _, typ := range []string{"at+jwt", "AT+JWT", "application/at+jwt"} {
		t.Run(typ, func(t *testing.T) {
			hdr := map[string]any{"alg": "ES256", "kid": e.svc.SigningKeyID(), "typ": typ}
			tok := signES256(t, e.signer(t).Private, hdr, validClaims(now))
			if _, err := e.svc.Verify(context.Background(), tok, KindAccess); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestErrorTextNeverContainsToken(t *testing.T) {
	e := newEnv(t, Options{})
	tok := e.access(t, time.Minute)
	parts := strings.Split(tok, ".")
	tampered := parts[0] + "." + parts[1] + "x." + parts[2]
	e.clock.Advance(time.Hour)
	for _, bad := range []string{tok, tampered} {
		_, err := e.svc.Verify(context.Background(), bad, KindAccess)
		if err == nil {
			t.Fatal("accepted")
		}
		for _, p := range parts {
			if strings.Contains(err.Error(), p) {
				t.Fatalf("error %q contains a token part", err)
			}
		}
	}
}

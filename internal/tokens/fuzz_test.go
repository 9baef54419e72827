package tokens

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fuzzTokens are one service's tokens of each kind, for placeholders.
type fuzzTokens struct {
	byKind map[Kind]string
	repl   *strings.Replacer
}

func issueFuzzTokens(t *testing.T, e *env) *fuzzTokens {
	t.Helper()
	access := e.access(t, time.Hour)
	refresh, _, err := e.svc.IssueRefresh(RefreshClaims{ClientID: "client-1", LoginID: "login-1", RefreshSecret: "secret-1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := e.svc.IssueID(IDClaims{Sub: "user-1", ClientID: "client-1", LoginID: "login-1", FHIRUser: "Practitioner/123"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pairs := []string{"{access}", access, "{refresh}", refresh, "{id}", id, "{kid}", e.svc.SigningKeyID()}
	for _, tk := range []struct{ prefix, tok string }{{"a", access}, {"r", refresh}, {"i", id}} {
		p := strings.Split(tk.tok, ".")
		pairs = append(pairs, "{"+tk.prefix+"h}", p[0], "{"+tk.prefix+"p}", p[1], "{"+tk.prefix+"s}", p[2])
		// {…x}: the other ECDSA spelling of the signature, s → n − s.
		pairs = append(pairs, "{"+tk.prefix+"x}", strings.Split(respell(t, tk.tok), ".")[2])
	}
	return &fuzzTokens{
		byKind: map[Kind]string{KindAccess: access, KindRefresh: refresh, KindID: id},
		repl:   strings.NewReplacer(pairs...),
	}
}

// FuzzVerify verifies arbitrary strings as each kind of token. It must never
// panic, must refuse everything with an *Error, and may accept only what the
// service itself signed as that kind, exactly as it was issued. Placeholders
// become a live service's tokens and their parts, so mutations start from
// real tokens: {access} {refresh} {id} {kid}, and {ah} {ap} {as} (header,
// payload, signature of the access token, {ax} its other ECDSA spelling; r…
// and i… for the others). Seeds: testdata/fuzz/FuzzVerify and below.
func FuzzVerify(f *testing.F) {
	for _, s := range []struct {
		tok  string
		kind uint8
	}{
		{"{access}", uint8(KindAccess)},
		{"{refresh}", uint8(KindRefresh)},
		{"{id}", uint8(KindID)},
		{"{refresh}", uint8(KindAccess)},
		{"{id}", uint8(KindAccess)},
		{"{access}", uint8(KindRefresh)},
		{"{ah}.{rp}.{as}", uint8(KindAccess)},
		{"{ah}.{ap}.", uint8(KindAccess)},
		{"{ah}.{ap}.{rs}", uint8(KindAccess)},
		{"{ah}.{ap}.{as}.", uint8(KindAccess)},
		{"{ah}.{ap}.{ax}", uint8(KindAccess)},
		{"{rh}.{rp}.{rx}", uint8(KindRefresh)},
		{"eyJhbGciOiJub25lIiwidHlwIjoiYXQrand0In0.{ap}.", uint8(KindAccess)},
		{"eyJhbGciOiJIUzI1NiIsImtpZCI6IntraWR9In0.{ap}.{as}", uint8(KindAccess)},
		{"a.b.c.d.e", uint8(KindAccess)},
		{"", uint8(KindAccess)},
		{"{access}", 9},
	} {
		f.Add(s.tok, s.kind)
	}
	f.Fuzz(func(t *testing.T, raw string, kind uint8) {
		e := newEnv(t, Options{})
		toks := issueFuzzTokens(t, e)
		token := toks.repl.Replace(raw)
		want := Kind(kind)
		for range 2 { // the second pass answers from the verified cache
			c, err := e.svc.Verify(context.Background(), token, want)
			if err != nil {
				if c != nil {
					t.Fatal("claims returned with an error")
				}
				if ReasonOf(err) == "" {
					t.Fatalf("error %v has no reason", err)
				}
				return
			}
			issued, ok := toks.byKind[want]
			// Byte for byte: an issued token has one spelling (canonical
			// base64url, low-S signature).
			if !ok || token != issued {
				t.Fatalf("accepted as %v a token the service did not sign as one: %q", want, token)
			}
			if c.Kind != want || c.Issuer != testIssuer || c.LoginID != "login-1" {
				t.Fatalf("claims %+v", c)
			}
		}
	})
}

// FuzzVerifySignedClaims signs arbitrary headers and claims with the
// service's own key, which reaches the checks after the signature: whatever
// Verify accepts must be this issuer's, of the kind asked for, unexpired and
// not from the future. Seeds: testdata/fuzz/FuzzVerifySignedClaims and below.
func FuzzVerifySignedClaims(f *testing.F) {
	now := newClock().Now().Unix()
	claims := func(extra string) []byte {
		return []byte(`{"iss":"` + testIssuer + `","sub":"u","login_id":"l","iat":` + strconv.FormatInt(now, 10) + `,"exp":` + strconv.FormatInt(now+60, 10) + extra + `}`)
	}
	for _, s := range []struct {
		header, claims string
		kind           uint8
	}{
		{`{"alg":"ES256","kid":"{kid}","typ":"at+jwt"}`, string(claims("")), uint8(KindAccess)},
		{`{"alg":"ES256","kid":"{kid}","typ":"JWT"}`, `{"iss":"` + testIssuer + `","refresh_secret":"s","iat":` + strconv.FormatInt(now, 10) + `,"exp":` + strconv.FormatInt(now+60, 10) + `}`, uint8(KindRefresh)},
		{`{"alg":"ES256","kid":"{kid}","typ":"JWT"}`, string(claims("")), uint8(KindID)},
		{`{"alg":"ES256","kid":"{kid}","typ":"at+jwt"}`, string(claims(`,"nbf":` + strconv.FormatInt(now+3600, 10))), uint8(KindAccess)},
		{`{"alg":"ES256","kid":"{kid}","typ":"at+jwt"}`, `{"iss":"` + testIssuer + `","iat":1e300,"exp":1.5e300}`, uint8(KindAccess)},
		{`{"alg":"ES256","kid":"{kid}","typ":"at+jwt"}`, `{"iss":"` + testIssuer + `","iat":-1,"exp":"9999999999"}`, uint8(KindAccess)},
		{`{"alg":"ES256","kid":"{kid}","typ":"at+jwt","crit":["exp"]}`, string(claims("")), uint8(KindAccess)},
		{`{"alg":"ES256","kid":"{kid}","typ":"application/at+jwt","ALG":"none"}`, string(claims(`,"ISS":"x"`)), uint8(KindAccess)},
	} {
		f.Add([]byte(s.header), []byte(s.claims), s.kind)
	}
	f.Fuzz(func(t *testing.T, header, claims []byte, kind uint8) {
		e := newEnv(t, Options{})
		header = []byte(strings.ReplaceAll(string(header), "{kid}", e.svc.SigningKeyID()))
		token := signRaw(t, e.signer(t).Private, header, claims)
		c, err := e.svc.Verify(context.Background(), token, Kind(kind))
		if err != nil {
			if c != nil || ReasonOf(err) == "" {
				t.Fatalf("refusal %v with claims %v", err, c)
			}
			return
		}
		now := e.clock.Now()
		switch {
		case c.Kind != Kind(kind) || Kind(kind) < KindAccess || Kind(kind) > KindID:
			t.Fatalf("accepted as kind %v when %d was asked", c.Kind, kind)
		case c.Issuer != testIssuer:
			t.Fatalf("accepted issuer %q", c.Issuer)
		case !now.Before(c.ExpiresAt):
			t.Fatalf("accepted a token that expired at %v (now %v)", c.ExpiresAt, now)
		case c.IssuedAt.After(now.Add(ClockSkew)) || c.NotBefore.After(now.Add(ClockSkew)):
			t.Fatalf("accepted a token from the future: iat %v nbf %v", c.IssuedAt, c.NotBefore)
		case c.KeyID != e.svc.SigningKeyID():
			t.Fatalf("accepted kid %q", c.KeyID)
		case c.Kind == KindRefresh && (c.RefreshSecret == "" || c.Subject != ""):
			t.Fatalf("refresh token claims %+v", c)
		case c.Kind == KindID && (c.RefreshSecret != "" || c.Subject == ""):
			t.Fatalf("ID token claims %+v", c)
		}
	})
}

// signRaw signs base64url(header).base64url(claims) with ES256, whatever the
// bytes are.
func signRaw(t *testing.T, priv *ecdsa.PrivateKey, header, claims []byte) string {
	t.Helper()
	input := b64(header) + "." + b64(claims)
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, priv, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64(sig)
}

// TestVerifyRefusesNonCanonicalEncodings: RFC 7515 §2 and §7.1 serialise a
// JWS's parts as base64url without padding, so another spelling of an issued
// token is a token the service never issued. The fuzz targets found that
// these verify; FuzzVerify and the oauth targets compare signed content so
// they stay green until this is fixed.
func TestVerifyRefusesNonCanonicalEncodings(t *testing.T) {
	e := newEnv(t, Options{CacheSize: -1})
	tok := e.access(t, time.Hour)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, tok[len(tok)-1])
	for _, tc := range []struct{ name, token string }{
		// A 64-byte signature is 86 characters; the last carries 2 bits of
		// data and 4 unused bits, which must be zero.
		{"unused bits of the signature set", tok[:len(tok)-1] + string(alphabet[last^1])},
		{"padded signature", tok + "=="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.svc.Verify(context.Background(), tc.token, KindAccess); err == nil {
				t.Fatalf("accepted %q", tc.token)
			}
		})
	}
}

package tokens

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// IssueAccess signs an access token (header typ "at+jwt") valid for ttl and
// returns it with its expiry. Claims: iss, sub, username (= sub, as Medplum),
// aud (= client_id), client_id, login_id, profile, scope, email and patient
// (when set), iat, nbf, exp and a random jti.
func (s *Service) IssueAccess(c AccessClaims, ttl time.Duration) (string, time.Time, error) {
	if c.Sub == "" || c.LoginID == "" {
		return "", time.Time{}, errors.New("tokens: issuing access token: sub and login_id are required")
	}
	w := wireClaims{
		Subject:  c.Sub,
		Username: c.Sub,
		Audience: c.ClientID,
		ClientID: c.ClientID,
		LoginID:  c.LoginID,
		Profile:  c.Profile,
		Scope:    c.Scope,
		Email:    c.Email,
		Patient:  c.Patient,
	}
	return s.issue(typAccess, &w, ttl, KindAccess)
}

// IssueRefresh signs a refresh token (header typ "JWT") valid for ttl.
// Claims: iss, aud (= client_id), client_id, login_id, refresh_secret, iat,
// exp and a random jti.
func (s *Service) IssueRefresh(c RefreshClaims, ttl time.Duration) (string, time.Time, error) {
	if c.LoginID == "" || c.RefreshSecret == "" {
		return "", time.Time{}, errors.New("tokens: issuing refresh token: login_id and refresh_secret are required")
	}
	w := wireClaims{
		Audience:      c.ClientID,
		ClientID:      c.ClientID,
		LoginID:       c.LoginID,
		RefreshSecret: c.RefreshSecret,
	}
	return s.issue(typJWT, &w, ttl, KindRefresh)
}

// IssueID signs an OpenID Connect ID token (header typ "JWT") valid for ttl.
// Claims: iss, sub, aud (= client_id), client_id, login_id, fhirUser, email,
// nonce, auth_time (when set), iat, nbf, exp and a random jti.
func (s *Service) IssueID(c IDClaims, ttl time.Duration) (string, time.Time, error) {
	if c.Sub == "" {
		return "", time.Time{}, errors.New("tokens: issuing ID token: sub is required")
	}
	w := wireClaims{
		Subject:  c.Sub,
		Audience: c.ClientID,
		ClientID: c.ClientID,
		LoginID:  c.LoginID,
		FHIRUser: c.FHIRUser,
		Email:    c.Email,
		Nonce:    c.Nonce,
	}
	if !c.AuthTime.IsZero() {
		w.AuthTime = newNumericDate(c.AuthTime)
	}
	return s.issue(typJWT, &w, ttl, KindID)
}

func (s *Service) issue(typ string, w *wireClaims, ttl time.Duration, kind Kind) (string, time.Time, error) {
	// A token outliving MaxTokenLifetime could outlive its key's grace
	// period, and the verified cache relies on that never happening.
	if ttl <= 0 || ttl > s.maxLife {
		return "", time.Time{}, fmt.Errorf("tokens: issuing %s token: lifetime %v outside (0, %v]", kind, ttl, s.maxLife)
	}
	s.refreshKeysNow()
	ring := s.ring.Load()
	now := s.now().Truncate(time.Second)
	exp := now.Add(ttl)
	w.Issuer = s.issuer
	w.IssuedAt = newNumericDate(now)
	w.ExpiresAt = newNumericDate(exp)
	if kind != KindRefresh {
		w.NotBefore = w.IssuedAt
	}
	w.ID = rand.Text()
	payload, err := json.Marshal(w)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("tokens: issuing %s token: %w", kind, err)
	}
	hdr := jws.NewHeaders()
	for name, v := range map[string]any{jws.KeyIDKey: ring.signer.ID, jws.TypeKey: typ, lowSHeader: true} {
		if err := hdr.Set(name, v); err != nil {
			return "", time.Time{}, fmt.Errorf("tokens: issuing %s token: %w", kind, err)
		}
	}
	tok, err := jws.Sign(payload, jws.WithKey(jwa.ES256(), ring.signer.Private, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("tokens: issuing %s token: signing: %w", kind, err)
	}
	// jwx signs with crypto/ecdsa, whose s is high half the time; the
	// header above promises low-S, so verifiers refuse the other spelling.
	return toLowS(string(tok)), exp, nil
}

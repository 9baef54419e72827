package tokens

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// Key is one ES256 signing key and its lifecycle.
type Key struct {
	// ID is the JWS "kid": a random UUID.
	ID string
	// Private is a P-256 private key.
	Private *ecdsa.PrivateKey
	// Active keys may sign; the newest active key (by Created) does.
	Active bool
	// Created is when the key was generated.
	Created time.Time
	// Retired is when the key stopped signing. A retired key keeps verifying
	// until Retired + Options.MaxTokenLifetime. An inactive key with a zero
	// Retired is ignored.
	Retired time.Time
}

// KeyStore persists keys. fhirgate implements it over its Badger store; it
// must be safe for concurrent use by several replicas sharing the store.
type KeyStore interface {
	// Load returns every stored key, in any order.
	Load(ctx context.Context) ([]Key, error)
	// Save creates or replaces the key with the same ID.
	Save(ctx context.Context, key Key) error
}

// newKey generates an active P-256 key with a random UUID as its ID.
func newKey(now time.Time) (Key, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Key{}, fmt.Errorf("generating P-256 key: %w", err)
	}
	return Key{ID: newUUID(), Private: priv, Active: true, Created: now}, nil
}

// newUUID returns a random (version 4) UUID; kids look like Medplum's
// JsonWebKey resource ids so a store can use them as resource ids.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

func checkCurve(priv *ecdsa.PrivateKey) error {
	if priv == nil {
		return errors.New("no private key")
	}
	if priv.Curve != elliptic.P256() {
		return fmt.Errorf("curve %s is not P-256", priv.Curve.Params().Name)
	}
	return nil
}

// MarshalJWK returns the key as flat JWK fields, all strings: kty ("EC"),
// crv ("P-256"), x, y, d (base64url, the private scalar), kid (= ID) and alg
// ("ES256"). Active, Created and Retired are not included; the store keeps
// them beside these fields. The result holds the private key: store it as a
// secret and never publish it ([Service.JWKS] is the public form).
func (k Key) MarshalJWK() (map[string]string, error) {
	if err := checkCurve(k.Private); err != nil {
		return nil, fmt.Errorf("marshalling key %q: %w", k.ID, err)
	}
	jk, err := jwk.Import(k.Private)
	if err != nil {
		return nil, fmt.Errorf("marshalling key %q: %w", k.ID, err)
	}
	if err := jk.Set(jwk.KeyIDKey, k.ID); err != nil {
		return nil, fmt.Errorf("marshalling key %q: %w", k.ID, err)
	}
	if err := jk.Set(jwk.AlgorithmKey, jwa.ES256()); err != nil {
		return nil, fmt.Errorf("marshalling key %q: %w", k.ID, err)
	}
	b, err := json.Marshal(jk)
	if err != nil {
		return nil, fmt.Errorf("marshalling key %q: %w", k.ID, err)
	}
	var fields map[string]string
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, fmt.Errorf("marshalling key %q: %w", k.ID, err)
	}
	return fields, nil
}

// KeyFromJWK rebuilds a Key (ID and Private only) from the fields written by
// [Key.MarshalJWK]. It requires kty "EC", crv "P-256" and the private part d;
// kid and alg, when present, must be id and "ES256". The caller sets Active,
// Created and Retired from its own record.
func KeyFromJWK(id string, fields map[string]string) (Key, error) {
	if id == "" {
		return Key{}, errors.New("parsing JWK: empty key id")
	}
	switch {
	case fields["kty"] != "EC":
		return Key{}, fmt.Errorf("parsing JWK %q: kty is not EC", id)
	case fields["crv"] != "P-256":
		return Key{}, fmt.Errorf("parsing JWK %q: crv is not P-256", id)
	case fields["d"] == "":
		return Key{}, fmt.Errorf("parsing JWK %q: no private part (d)", id)
	case fields["kid"] != "" && fields["kid"] != id:
		return Key{}, fmt.Errorf("parsing JWK %q: kid does not match the key id", id)
	case fields["alg"] != "" && fields["alg"] != "ES256":
		return Key{}, fmt.Errorf("parsing JWK %q: alg is not ES256", id)
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return Key{}, fmt.Errorf("parsing JWK %q: %w", id, err)
	}
	jk, err := jwk.ParseKey(b)
	if err != nil {
		return Key{}, fmt.Errorf("parsing JWK %q: %w", id, err)
	}
	var priv ecdsa.PrivateKey
	if err := jwk.Export(jk, &priv); err != nil {
		return Key{}, fmt.Errorf("parsing JWK %q: %w", id, err)
	}
	if err := checkCurve(&priv); err != nil {
		return Key{}, fmt.Errorf("parsing JWK %q: %w", id, err)
	}
	// Rebuilding from the scalar alone catches an x/y that does not belong
	// to d: tokens signed with such a key would never verify against the
	// public key published in the JWKS.
	d, err := priv.Bytes()
	if err != nil {
		return Key{}, fmt.Errorf("parsing JWK %q: %w", id, err)
	}
	rebuilt, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d)
	if err != nil {
		return Key{}, fmt.Errorf("parsing JWK %q: %w", id, err)
	}
	if !rebuilt.PublicKey.Equal(&priv.PublicKey) {
		return Key{}, fmt.Errorf("parsing JWK %q: public point does not match the private scalar", id)
	}
	return Key{ID: id, Private: rebuilt}, nil
}

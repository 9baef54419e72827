package tokens

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Kind is the kind of token Verify expects.
type Kind uint8

// Token kinds. The zero Kind is invalid so a forgotten argument fails closed.
const (
	// KindAccess: header typ "at+jwt" (RFC 9068).
	KindAccess Kind = iota + 1
	// KindRefresh: header typ "JWT" with a refresh_secret claim and no sub.
	KindRefresh
	// KindID: OpenID Connect ID token; header typ "JWT" with a sub and no
	// refresh_secret.
	KindID
)

// String returns "access", "refresh" or "id".
func (k Kind) String() string {
	switch k {
	case KindAccess:
		return "access"
	case KindRefresh:
		return "refresh"
	case KindID:
		return "id"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Header "typ" values. Access tokens follow RFC 9068; refresh and ID tokens
// keep Medplum's "JWT".
const (
	typAccess = "at+jwt"
	typJWT    = "JWT"
)

// AccessClaims are the caller-supplied claims of an access token.
type AccessClaims struct {
	// Sub is the User id ("sub", also "username" as Medplum does). Required.
	Sub string
	// ClientID is the ClientApplication id ("client_id" and "aud").
	ClientID string
	// LoginID is the Login id ("login_id"); callers check revocation with it.
	// Required.
	LoginID string
	// Profile is the membership profile reference, e.g. "Practitioner/123".
	Profile string
	// Scope is the granted scope, space-separated.
	Scope string
	// Email is set only when the scope grants it (Medplum: scope contains
	// "email").
	Email string
	// Patient is the Patient id of the token's patient context ("patient",
	// as SMART's launch context), when it has one.
	Patient string
}

// RefreshClaims are the claims of a refresh token.
type RefreshClaims struct {
	ClientID string
	// LoginID is required.
	LoginID string
	// RefreshSecret is the Login's refresh secret. Required.
	RefreshSecret string
}

// IDClaims are the claims of an OpenID Connect ID token.
type IDClaims struct {
	// Sub is the User id. Required.
	Sub      string
	ClientID string
	LoginID  string
	// FHIRUser is the profile reference ("fhirUser").
	FHIRUser string
	Email    string
	Nonce    string
	// AuthTime is when the user authenticated ("auth_time"); zero omits it.
	AuthTime time.Time
}

// Claims are the verified content of a token. Fields absent from the token
// are zero.
type Claims struct {
	Kind  Kind
	KeyID string // header "kid"
	ID    string // "jti"

	Issuer   string
	Subject  string // "sub": the User id
	Audience string // "aud": the client id
	ClientID string
	LoginID  string
	Profile  string // e.g. "Practitioner/123"
	// Scope is the granted scope, space-separated. An access token without
	// one (issued before scopes were granted) has full access, user/*.cruds.
	Scope    string
	Patient  string // "patient": the Patient id of the patient context
	Username string
	Email    string
	FHIRUser string // ID tokens
	Nonce    string // ID tokens
	// RefreshSecret is set for refresh tokens; compare it in constant time.
	RefreshSecret string

	AuthTime  time.Time // ID tokens; zero when absent
	IssuedAt  time.Time
	NotBefore time.Time // zero when absent
	ExpiresAt time.Time

	// lowS: the token's header marks it as signed low-S only, so its high-S
	// spelling is refused, also when the low-S one is in the cache.
	lowS bool
}

// wireClaims is the JSON payload of every token this package issues.
type wireClaims struct {
	Issuer        string       `json:"iss"`
	Subject       string       `json:"sub,omitempty"`
	Audience      string       `json:"aud,omitempty"`
	ClientID      string       `json:"client_id,omitempty"`
	LoginID       string       `json:"login_id,omitempty"`
	Profile       string       `json:"profile,omitempty"`
	Scope         string       `json:"scope,omitempty"`
	Patient       string       `json:"patient,omitempty"`
	Username      string       `json:"username,omitempty"`
	Email         string       `json:"email,omitempty"`
	FHIRUser      string       `json:"fhirUser,omitempty"`
	Nonce         string       `json:"nonce,omitempty"`
	AuthTime      *numericDate `json:"auth_time,omitempty"`
	RefreshSecret string       `json:"refresh_secret,omitempty"`
	IssuedAt      *numericDate `json:"iat"`
	NotBefore     *numericDate `json:"nbf,omitempty"`
	ExpiresAt     *numericDate `json:"exp"`
	ID            string       `json:"jti"`
}

// numericDate is a JWT NumericDate: seconds since the epoch. Issued as an
// integer; parsed from any JSON number (Medplum's auth_time can be
// fractional), rounded down.
type numericDate int64

func newNumericDate(t time.Time) *numericDate {
	d := numericDate(t.Unix())
	return &d
}

func (d *numericDate) time() time.Time {
	if d == nil {
		return time.Time{}
	}
	return time.Unix(int64(*d), 0)
}

// UnmarshalJSON accepts a JSON number within ±2^53 seconds.
func (d *numericDate) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("numeric date: %w", errors.Unwrap(err))
	}
	if math.IsNaN(f) || math.Abs(f) > 1<<53 {
		return errors.New("numeric date out of range")
	}
	*d = numericDate(math.Floor(f))
	return nil
}

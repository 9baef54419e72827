package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fhirgate/fhirgate/internal/egress"
)

// Project is a Medplum project: the tenant that owns clients, bots and
// memberships.
type Project struct {
	base
	Name        string           `json:"name"`
	Description string           `json:"description,omitempty"`
	Secret      []ProjectSetting `json:"secret,omitempty"`
	Features    []string         `json:"features,omitempty"`
	// Egress is the project's allow-list for webhooks and bots' fetch (see
	// package egress); nil or empty refuses every outbound request.
	Egress *ProjectEgress `json:"egress,omitempty"`
}

// ProjectEgress is a project's egress allow-list, in egress.Policy's terms:
// `host[:port]` entries reachable over https (Allow) or http and https
// (AllowHTTP), and the private ranges allowed names may resolve to.
type ProjectEgress struct {
	Allow        []string `json:"allow,omitempty"`
	AllowHTTP    []string `json:"allowHttp,omitempty"`
	AllowPrivate []string `json:"allowPrivate,omitempty"`
}

// egressFields are the record's names of egress.Policy's lists.
var egressFields = map[string]string{"allow": "allow", "allow_http": "allowHttp", "allow_private": "allowPrivate"}

// Policy is the allow-list as package egress reads it; nil allows nothing.
func (e *ProjectEgress) Policy() *egress.Policy {
	if e == nil {
		return nil
	}
	return &egress.Policy{Allow: e.Allow, AllowHTTP: e.AllowHTTP, AllowPrivate: e.AllowPrivate}
}

func (p *Project) resourceType() string { return "Project" }

// normalize sets meta.project to the project's own id, as Medplum does.
func (p *Project) normalize(time.Time) { p.Meta.Project = p.ID }

func (p *Project) validate() error {
	if err := checkRequired("name", p.Name); err != nil {
		return err
	}
	if err := p.Egress.Policy().Check(); err != nil {
		var ee *egress.EntryError
		if errors.As(err, &ee) {
			return invalid("egress."+egressFields[ee.List], fmt.Sprintf("'%s': %v", ee.Entry, ee.Err))
		}
		return invalid("egress", err.Error())
	}
	return checkSettings("secret", p.Secret)
}

// ClientApplication is an OAuth client of a project. With an
// IdentityProvider it accepts external access tokens for token exchange;
// with a secret or keys it signs in as itself (client_credentials), with
// the identity of its own membership in the project (a ProjectMembership
// whose user is this client).
type ClientApplication struct {
	base
	Name             string            `json:"name,omitempty"`
	Description      string            `json:"description,omitempty"`
	IdentityProvider *IdentityProvider `json:"identityProvider,omitempty"`
	// AccessTokenLifetime and RefreshTokenLifetime use Medplum's format,
	// see [ParseLifetime].
	AccessTokenLifetime  string `json:"accessTokenLifetime,omitempty"`
	RefreshTokenLifetime string `json:"refreshTokenLifetime,omitempty"`
	// Secret is the optional client secret. It is written in clear and
	// stored hashed (see [HashSecret]): reading the client back gives the
	// hash, which writing it back keeps.
	Secret string `json:"secret,omitempty"`
	// RetiringSecret is the previous secret during a rotation, valid
	// beside Secret until it is removed (Medplum's retiringSecret). Stored
	// hashed like Secret.
	RetiringSecret string `json:"retiringSecret,omitempty"`
	// JWKSURI is the https (or http) URL of the client's public keys, for
	// private_key_jwt client assertions (RFC 7523).
	JWKSURI string `json:"jwksUri,omitempty"`
	// JWKS is the client's public key set inline ({"keys": [...]}, RFC
	// 7591's jwks), the alternative to JWKSURI.
	JWKS json.RawMessage `json:"jwks,omitempty"`
	// Status is Medplum's client status: empty or "active" lets the client
	// sign in; any other value ("off", "error") refuses it.
	Status string `json:"status,omitempty"`
	// Scope is what the client may be granted: SMART scopes and OpenID
	// ones, space-separated (RFC 7591's client-metadata name). Empty means
	// full access, user/*.cruds, as before clients declared scopes.
	// Checked against RFC 6749's characters and the SMART grammar
	// (internal/authz).
	Scope string `json:"scope,omitempty"`
}

// IsActive reports whether the client may sign in (Status empty or
// "active").
func (c *ClientApplication) IsActive() bool { return c.Status == "" || c.Status == "active" }

// normalize stores the secrets hashed, and collapses the scope's
// whitespace to single spaces, so the stored scope is the RFC 6749
// spelling whatever the operator typed.
func (c *ClientApplication) normalize(time.Time) {
	c.Secret = HashSecret(c.Secret)
	c.RetiringSecret = HashSecret(c.RetiringSecret)
	c.Scope = strings.Join(strings.Fields(c.Scope), " ")
}

// IdentityProvider describes how to validate an external access token:
// by its signature against JWKSURI when it is a JWT, at UserInfoURL when it
// is opaque or lacks the claims the match needs. At least one is required.
type IdentityProvider struct {
	// UserInfoURL is the OIDC userinfo endpoint (absolute http/https URL).
	UserInfoURL string `json:"userInfoUrl,omitempty"`
	// JWKSURI is the provider's key set (absolute http/https URL); with it,
	// Issuer and Audience are required.
	JWKSURI  string   `json:"jwksUri,omitempty"`
	Issuer   string   `json:"issuer,omitempty"`
	Audience []string `json:"audience,omitempty"`
	// UseSubject matches the membership by externalId = sub instead of by
	// the user's email.
	UseSubject bool `json:"useSubject,omitempty"`
	// Timeout and CacheTTL are Go durations ("5s").
	Timeout              string `json:"timeout,omitempty"`
	CacheTTL             string `json:"cacheTtl,omitempty"`
	AllowUnverifiedEmail bool   `json:"allowUnverifiedEmail,omitempty"`
}

func (c *ClientApplication) resourceType() string { return "ClientApplication" }

func (c *ClientApplication) validate() error {
	if err := checkProjectID("meta.project", c.Meta.Project, true); err != nil {
		return err
	}
	if err := checkLifetime("accessTokenLifetime", c.AccessTokenLifetime); err != nil {
		return err
	}
	if err := checkLifetime("refreshTokenLifetime", c.RefreshTokenLifetime); err != nil {
		return err
	}
	if err := checkSecret("secret", c.Secret); err != nil {
		return err
	}
	if err := checkSecret("retiringSecret", c.RetiringSecret); err != nil {
		return err
	}
	if c.RetiringSecret != "" && c.Secret == "" {
		return invalid("retiringSecret", "needs a secret beside it")
	}
	if c.JWKSURI != "" {
		if err := checkHTTPURL("jwksUri", c.JWKSURI); err != nil {
			return err
		}
		if len(c.JWKS) > 0 {
			return invalid("jwks", "give the keys inline or by jwksUri, not both")
		}
	}
	if err := checkKeySet("jwks", c.JWKS); err != nil {
		return err
	}
	if err := checkScope("scope", c.Scope); err != nil {
		return err
	}
	if idp := c.IdentityProvider; idp != nil {
		if err := checkIdentityProviderKeys(idp); err != nil {
			return err
		}
		if err := checkGoDuration("identityProvider.timeout", idp.Timeout, false); err != nil {
			return err
		}
		if err := checkGoDuration("identityProvider.cacheTtl", idp.CacheTTL, true); err != nil {
			return err
		}
	}
	return nil
}

// checkIdentityProviderKeys requires a way to check tokens: a userinfo URL,
// a key set, or both; a key set comes with the issuer and audience that
// keep another tenant's or another application's tokens out.
func checkIdentityProviderKeys(idp *IdentityProvider) error {
	if idp.UserInfoURL != "" || idp.JWKSURI == "" {
		if err := checkHTTPURL("identityProvider.userInfoUrl", idp.UserInfoURL); err != nil {
			return err
		}
	}
	if idp.JWKSURI == "" {
		if idp.Issuer != "" || len(idp.Audience) > 0 {
			return invalid("identityProvider.jwksUri", "is required with issuer or audience")
		}
		return nil
	}
	if err := checkHTTPURL("identityProvider.jwksUri", idp.JWKSURI); err != nil {
		return err
	}
	if err := checkRequired("identityProvider.issuer", idp.Issuer); err != nil {
		return err
	}
	if len(idp.Audience) == 0 {
		return invalid("identityProvider.audience", "is required with jwksUri")
	}
	for _, a := range idp.Audience {
		if err := checkRequired("identityProvider.audience", a); err != nil {
			return err
		}
	}
	return nil
}

func (c *ClientApplication) references() []mustExist {
	return []mustExist{{"meta.project", "Project", c.Meta.Project}}
}

// User is a server-wide user account, unique by email (compared after
// [NormalizeEmail]: ASCII letters case-insensitively, all else exactly).
type User struct {
	base
	Email     string `json:"email"`
	FirstName string `json:"firstName,omitempty"`
	LastName  string `json:"lastName,omitempty"`
}

func (u *User) resourceType() string { return "User" }

func (u *User) validate() error {
	if err := checkRequired("email", u.Email); err != nil {
		return err
	}
	if err := checkIndexable("email", u.Email); err != nil {
		return err
	}
	if !validEmail(u.Email) {
		return invalid("email", fmt.Sprintf("%q is not a valid email address", u.Email))
	}
	return nil
}

func (u *User) indexes() []indexEntry {
	return []indexEntry{{
		key:    uniqueKey(idxUserEmail, NormalizeEmail(u.Email)),
		unique: true,
		what:   fmt.Sprintf("a User with email %q", u.Email),
	}}
}

// ProjectMembership grants a user (with a profile) access to a project.
type ProjectMembership struct {
	base
	// Project is "Project/<id>"; meta.project is derived from it.
	Project Reference `json:"project"`
	// User is "User/<id>" for a person, or, as in Medplum, the
	// "ClientApplication/<id>" or "Bot/<id>" that signs in as itself.
	User Reference `json:"user"`
	// Profile is the FHIR resource acting for the user: Practitioner,
	// Patient, RelatedPerson, Bot, ClientApplication or Device.
	Profile *Reference `json:"profile,omitempty"`
	// ExternalID is unique within the project; token exchange with
	// useSubject matches it against the external token's sub.
	ExternalID   string     `json:"externalId,omitempty"`
	Admin        bool       `json:"admin,omitempty"`
	Active       *bool      `json:"active,omitempty"` // nil means active
	AccessPolicy *Reference `json:"accessPolicy,omitempty"`
	// Scope is what a bot's membership (user "Bot/<id>") allows the bot
	// when it runs as itself: SMART scopes, as a client's scope, against
	// which its calls are authorized. Empty means the project's full
	// access. fhirgate's stand-in for the AccessPolicy of Medplum's bot
	// membership; only a bot's membership has one (a person's or a
	// client's scopes come from the client and the token).
	Scope string `json:"scope,omitempty"`
}

// profileTypes are the resource types a membership profile may reference.
var profileTypes = []string{"Practitioner", "Patient", "RelatedPerson", "Bot", "ClientApplication", "Device"}

func (m *ProjectMembership) resourceType() string { return "ProjectMembership" }

// IsActive reports whether the membership is active (Active unset or true).
func (m *ProjectMembership) IsActive() bool { return m.Active == nil || *m.Active }

// ProjectID returns the id part of the Project reference ("" if malformed).
func (m *ProjectMembership) ProjectID() string { return refID(m.Project.Reference, "Project") }

// UserID returns the id part of the User reference ("" if malformed or
// not a User).
func (m *ProjectMembership) UserID() string { return refID(m.User.Reference, "User") }

// principalTypes are the resource types a membership's user may reference.
var principalTypes = []string{"User", "ClientApplication", "Bot"}

// Principal is the member's key in the membership indexes: the User id for
// a person (as releases before machine members wrote it), the whole
// reference ("ClientApplication/<id>") otherwise. Index values are
// escaped, so the reference's '/' cannot collide with a User id.
func (m *ProjectMembership) Principal() string { return principalOf(m.User.Reference) }

func principalOf(ref string) string {
	t, id, err := ParseReference(ref)
	switch {
	case err != nil:
		return ""
	case t == "User":
		return id
	default:
		return ref
	}
}

func (m *ProjectMembership) normalize(time.Time) {
	if id := m.ProjectID(); id != "" {
		m.Meta.Project = id
	}
	m.Scope = strings.Join(strings.Fields(m.Scope), " ")
}

func (m *ProjectMembership) validate() error {
	if _, _, err := checkReference("project.reference", m.Project.Reference, "Project"); err != nil {
		return err
	}
	if err := checkIndexable("externalId", m.ExternalID); err != nil {
		return err
	}
	if _, _, err := checkReference("user.reference", m.User.Reference, principalTypes...); err != nil {
		return err
	}
	if err := checkOptionalReference("profile", m.Profile, profileTypes...); err != nil {
		return err
	}
	if m.Scope != "" && refID(m.User.Reference, "Bot") == "" {
		return invalid("scope", "only a bot's membership (user Bot/<id>) has a scope; a person's or a client's scopes come from its client")
	}
	if err := checkScope("scope", m.Scope); err != nil {
		return err
	}
	return checkOptionalReference("accessPolicy", m.AccessPolicy, "AccessPolicy")
}

func (m *ProjectMembership) references() []mustExist {
	userType, userID, _ := ParseReference(m.User.Reference) // validated
	return []mustExist{
		{"project.reference", "Project", m.ProjectID()},
		{"user.reference", userType, userID},
	}
}

func (m *ProjectMembership) indexes() []indexEntry {
	p, u := m.ProjectID(), m.Principal()
	out := []indexEntry{
		{key: indexKey(idxMembershipProjectUser, m.ID, p, u)},
		{key: indexKey(idxMembershipUser, m.ID, u)},
	}
	if m.ExternalID != "" {
		out = append(out, indexEntry{
			key:    uniqueKey(idxMembershipExternalID, p, m.ExternalID),
			unique: true,
			what:   fmt.Sprintf("a ProjectMembership with externalId %q in project %s", m.ExternalID, p),
		})
	}
	return out
}

// refID returns the id of a "<resourceType>/<id>" reference, or "" when ref
// is malformed or of another type.
func refID(ref, resourceType string) string {
	t, id, err := ParseReference(ref)
	if err != nil || t != resourceType {
		return ""
	}
	return id
}

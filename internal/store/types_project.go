package store

import (
	"fmt"
	"strings"
	"time"
)

// Project is a Medplum project: the tenant that owns clients, bots and
// memberships.
type Project struct {
	base
	Name        string           `json:"name"`
	Description string           `json:"description,omitempty"`
	Secret      []ProjectSetting `json:"secret,omitempty"`
	Features    []string         `json:"features,omitempty"`
}

func (p *Project) resourceType() string { return "Project" }

// normalize sets meta.project to the project's own id, as Medplum does.
func (p *Project) normalize(time.Time) { p.Meta.Project = p.ID }

func (p *Project) validate() error {
	if err := checkRequired("name", p.Name); err != nil {
		return err
	}
	return checkSettings("secret", p.Secret)
}

// ClientApplication is an OAuth client of a project. With an
// IdentityProvider it accepts external access tokens for token exchange.
type ClientApplication struct {
	base
	Name             string            `json:"name,omitempty"`
	Description      string            `json:"description,omitempty"`
	IdentityProvider *IdentityProvider `json:"identityProvider,omitempty"`
	// AccessTokenLifetime and RefreshTokenLifetime use Medplum's format,
	// see [ParseLifetime].
	AccessTokenLifetime  string `json:"accessTokenLifetime,omitempty"`
	RefreshTokenLifetime string `json:"refreshTokenLifetime,omitempty"`
	// Secret is the optional client secret.
	Secret string `json:"secret,omitempty"`
	// Scope is what the client may be granted: SMART scopes and OpenID
	// ones, space-separated (RFC 7591's client-metadata name). Empty means
	// full access, user/*.cruds, as before clients declared scopes.
	// Checked against RFC 6749's characters and the SMART grammar
	// (internal/authz).
	Scope string `json:"scope,omitempty"`
}

// IdentityProvider describes how to validate an external access token.
type IdentityProvider struct {
	// UserInfoURL is the OIDC userinfo endpoint (absolute http/https URL).
	UserInfoURL string `json:"userInfoUrl"`
	// UseSubject matches the membership by externalId = sub instead of by
	// the user's email.
	UseSubject bool `json:"useSubject,omitempty"`
	// Timeout and CacheTTL are Go durations ("5s").
	Timeout              string `json:"timeout,omitempty"`
	CacheTTL             string `json:"cacheTtl,omitempty"`
	AllowUnverifiedEmail bool   `json:"allowUnverifiedEmail,omitempty"`
}

func (c *ClientApplication) resourceType() string { return "ClientApplication" }

// normalize collapses the scope's whitespace to single spaces, so the
// stored scope is the RFC 6749 spelling whatever the operator typed.
func (c *ClientApplication) normalize(time.Time) {
	c.Scope = strings.Join(strings.Fields(c.Scope), " ")
}

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
	if err := checkScope("scope", c.Scope); err != nil {
		return err
	}
	if idp := c.IdentityProvider; idp != nil {
		if err := checkHTTPURL("identityProvider.userInfoUrl", idp.UserInfoURL); err != nil {
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
	// User is "User/<id>".
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
}

// profileTypes are the resource types a membership profile may reference.
var profileTypes = []string{"Practitioner", "Patient", "RelatedPerson", "Bot", "ClientApplication", "Device"}

func (m *ProjectMembership) resourceType() string { return "ProjectMembership" }

// IsActive reports whether the membership is active (Active unset or true).
func (m *ProjectMembership) IsActive() bool { return m.Active == nil || *m.Active }

// ProjectID returns the id part of the Project reference ("" if malformed).
func (m *ProjectMembership) ProjectID() string { return refID(m.Project.Reference, "Project") }

// UserID returns the id part of the User reference ("" if malformed).
func (m *ProjectMembership) UserID() string { return refID(m.User.Reference, "User") }

func (m *ProjectMembership) normalize(time.Time) {
	if id := m.ProjectID(); id != "" {
		m.Meta.Project = id
	}
}

func (m *ProjectMembership) validate() error {
	if _, _, err := checkReference("project.reference", m.Project.Reference, "Project"); err != nil {
		return err
	}
	if err := checkIndexable("externalId", m.ExternalID); err != nil {
		return err
	}
	if _, _, err := checkReference("user.reference", m.User.Reference, "User"); err != nil {
		return err
	}
	if err := checkOptionalReference("profile", m.Profile, profileTypes...); err != nil {
		return err
	}
	return checkOptionalReference("accessPolicy", m.AccessPolicy, "AccessPolicy")
}

func (m *ProjectMembership) references() []mustExist {
	return []mustExist{
		{"project.reference", "Project", m.ProjectID()},
		{"user.reference", "User", m.UserID()},
	}
}

func (m *ProjectMembership) indexes() []indexEntry {
	p, u := m.ProjectID(), m.UserID()
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

package store

import "time"

// Meta is the FHIR meta element. The store owns VersionID and LastUpdated.
type Meta struct {
	// VersionID is a new UUID on every write.
	VersionID string `json:"versionId,omitempty"`
	// LastUpdated is RFC 3339 UTC with milliseconds (2026-11-21T13:04:56.123Z).
	LastUpdated string `json:"lastUpdated,omitempty"`
	// Project is the bare id of the owning project, as in Medplum.
	Project string `json:"project,omitempty"`
	// Profile, Security, Tag and Source are FHIR's, kept as written.
	Profile  []string `json:"profile,omitempty"`
	Security []Coding `json:"security,omitempty"`
	Tag      []Coding `json:"tag,omitempty"`
	Source   string   `json:"source,omitempty"`
}

// Base holds the fields every resource has. Every resource struct embeds
// it, so its JSON fields flatten into the resource and ID, Meta and
// ResourceType are promoted (p.ID, p.Meta.Project).
type Base struct {
	ResourceType string `json:"resourceType"`
	ID           string `json:"id,omitempty"`
	Meta         Meta   `json:"meta"`
}

// Base returns b; through embedding it makes every resource struct a
// [Resource].
func (b *Base) Base() *Base { return b }

// base is how resource structs embed Base. A struct cannot have both a
// field and a method named Base, and embedding Base directly would create
// the field; embedding it under this alias names the field "base" instead,
// so the Base method is promoted. (Callers therefore set those fields
// through the promoted names, not in a composite literal.)
type base = Base

// Resource is any resource kept by the [Store]: a pointer to one of the
// resource structs of this package.
type Resource interface {
	Base() *Base
}

// Reference is a FHIR reference, "<ResourceType>/<id>".
type Reference struct {
	Reference string `json:"reference"`
	Display   string `json:"display,omitempty"`
}

// Identifier is a FHIR business identifier.
type Identifier struct {
	System string `json:"system,omitempty"`
	Value  string `json:"value"`
}

// Attachment is a FHIR attachment; fhirgate points URL at "Binary/<id>".
type Attachment struct {
	ContentType string `json:"contentType,omitempty"`
	Language    string `json:"language,omitempty"`
	Data        string `json:"data,omitempty"`
	URL         string `json:"url,omitempty"`
	Size        *int64 `json:"size,omitempty"`
	Hash        string `json:"hash,omitempty"`
	Title       string `json:"title,omitempty"`
	Creation    string `json:"creation,omitempty"`
}

// ProjectSetting is a named value (Medplum's Project.secret and Bot.secret
// entries).
type ProjectSetting struct {
	Name         string   `json:"name"`
	ValueString  string   `json:"valueString,omitempty"`
	ValueBoolean *bool    `json:"valueBoolean,omitempty"`
	ValueDecimal *float64 `json:"valueDecimal,omitempty"`
	ValueInteger *int64   `json:"valueInteger,omitempty"`
}

// Coding is a FHIR coding.
type Coding struct {
	System       string `json:"system,omitempty"`
	Version      string `json:"version,omitempty"`
	Code         string `json:"code,omitempty"`
	Display      string `json:"display,omitempty"`
	UserSelected *bool  `json:"userSelected,omitempty"`
}

// Period is a FHIR period; Start and End are RFC 3339 times.
type Period struct {
	Start string `json:"start,omitempty"`
	End   string `json:"end,omitempty"`
}

// timeLayout is FHIR instant format as Medplum writes it: UTC, milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z"

// FormatTime formats t as the store writes meta.lastUpdated and
// AuditEvent.recorded: RFC 3339 UTC with milliseconds.
func FormatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

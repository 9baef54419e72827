package fhir

// medplumResourceTypes are the resource types Medplum defines beyond FHIR
// R4 (@medplum/fhirtypes), which Medplum accepts wherever it accepts a
// resource: a scheduled bot's input is its Bot, for one.
var medplumResourceTypes = map[string]struct{}{
	"AccessPolicy":          {},
	"Agent":                 {},
	"AsyncJob":              {},
	"Bot":                   {},
	"BulkDataExport":        {},
	"ClientApplication":     {},
	"DomainConfiguration":   {},
	"JsonWebKey":            {},
	"Login":                 {},
	"PasswordChangeRequest": {},
	"Project":               {},
	"ProjectMembership":     {},
	"SmartAppLaunch":        {},
	"User":                  {},
	"UserConfiguration":     {},
	"UserSecurityRequest":   {},
}

// IsMedplumResourceType reports whether name is one of Medplum's own
// resource types such as "Bot" (not a FHIR R4 type).
func IsMedplumResourceType(name string) bool {
	_, ok := medplumResourceTypes[name]
	return ok
}

// Package fhir holds the small amount of FHIR R4 that fhirgate speaks itself:
// OperationOutcome responses (the error body of every FHIR-facing endpoint and
// of the admin API), references, and the table of R4 resource type names.
//
// fhirgate does not model FHIR resources in Go: the backend owns the data, and
// the gateway only needs to recognise a resource type and report errors in the
// shape FHIR clients (and Medplum's client) expect.
package fhir

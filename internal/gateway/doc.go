// Package gateway routes a site's requests: fhirgate's own endpoints (OAuth,
// discovery, the Medplum session and bot operations) are answered here;
// every other request under the FHIR base must carry a valid bearer token
// and then continues to the next handler (normally Caddy's reverse_proxy)
// with the caller's identity in headers the backend can trust.
//
// Whether a request is "under the FHIR base" is decided on a normalised
// path (percent-decoded, dot segments resolved, duplicate slashes and
// ;parameters removed, case-insensitive), so tricks like
// /x/../fhir/R4/Patient or /fhir;a/R4/Patient cannot reach a backend that
// normalises paths itself without a token. fhirgate's own operations are
// routed on one reading of the path, a Target, made once here and handed to
// Options.Operations, so they never read the path another way.
//
// Public paths pass without a token for the public methods only (GET, HEAD
// and OPTIONS unless configured), and reach the backend without any
// Authorization unless PublicUpstreamAuth says otherwise. Headers that make
// backends act on another path or method (X-Original-URL,
// X-HTTP-Method-Override and the like) are removed from every request, and
// a _method query parameter under the base is refused, so the backend
// serves the request the gate judged.
//
// An authenticated request is then authorized (internal/authz) against its
// token's scopes and patient context before anything acts on it, fhirgate's
// own operations included; a refusal is a 403 OperationOutcome the backend
// never sees. When the decision depends on data the request does not show
// (a patient-context read), the backend's answer is held and checked before
// any of it is sent; for a patient-context update or delete the stored
// resource is read and checked first. A bot's FHIR calls through Backend
// are authorized the same way.
//
// A run with no request of its own (an MLLP message, a queued async
// $execute) gets its Backend from BackendFor: each call is carried through
// the site's handler chain (Options.Dispatch) to this Gateway, which runs
// it as a request's call, authorized as the given identity. The carrier is
// marked in the request's context, never in a header, so nothing from
// outside can pose as one (backend_route.go).
//
// Last, Options.BackendTenant keeps projects apart on a shared backend:
// TenantPath sends the request into {base}/{project}/, a path built from
// the Target and refused (400) when any reading of a segment could leave
// the partition, and maps the partition back out of the answer's URLs;
// TenantHeader names the project in a header. A bot's calls follow it too.
package gateway

// Package authz decides whether a FHIR request is within the SMART scopes
// an access token carries. It is plain Go: no Caddy, no HTTP server; the
// gateway hands it the request's method, path, query and (when needed)
// body, and the backend's response when a patient context needs it.
//
// # Scopes
//
// Parse reads SMART App Launch v2 scopes
// (patient|user|system/<Type|*>.<subset of cruds>, with granular
// ?param=value restrictions) and v1 ones (.read = rs, .write = cud,
// .* = cruds), and understands the tokens that grant no resource
// permission (openid, fhirUser, offline_access, online_access, launch,
// launch/patient, …). A scope string with no resource scope means full
// access, as tokens issued before scopes were enforced do.
//
// Grant intersects the scope a client requests with what the client is
// allowed, at token issuance.
//
// # Decisions
//
// Authorizer.Decide classifies a request (interaction, resource types
// reached through _include, _revinclude, _has and chains, batch entries,
// operations) and checks it against a token's scopes and patient context.
// See docs/authorization.md for the rules.
package authz

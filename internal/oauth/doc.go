// Package oauth is fhirgate's authorization server and resource-server
// check, as plain net/http handlers over the store:
//
//   - POST /oauth2/token: RFC 8693 token exchange (an identity provider's
//     access or ID token, verified by its signature against the provider's
//     JWKS or checked at its userinfo endpoint, for our own tokens) and
//     the refresh_token grant with rotation and reuse detection;
//   - POST /oauth2/revoke (RFC 7009) and POST /oauth2/introspect (RFC 7662);
//   - discovery: JWKS and RFC 8414 / OpenID Connect metadata;
//   - Authenticate: bearer-token validation for the FHIR API (RFC 6750).
//
// Every token-endpoint error is RFC 6749 §5.2 JSON ({error,
// error_description}), never an OperationOutcome or HTML as Medplum sometimes
// answers. An identity provider outage is 503 temporarily_unavailable with
// Retry-After, never a 4xx that tells the client its user is bad.
//
// Each exchange persists a Login; its id is the tokens' login_id claim, and
// revoking it (or detecting a refresh-token replay) cuts off every token of
// that sign-in on the very next request, because Authenticate reads the
// Login on every request. The signature check itself is cached by the tokens
// package.
package oauth

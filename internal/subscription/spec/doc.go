// Package spec is the meaning of a Subscription that fhirgate evaluates
// itself, free of HTTP servers and Caddy: which Subscriptions it accepts
// (rest-hook channels to a Bot or a URL, criteria "Type" or
// "Type?search-params", Medplum's subscription extensions), what a write
// the gate passed changed (Changes, from the backend's answer), and what a
// rest-hook delivery carries (Headers, Sign).
//
// # Medplum's extensions
//
//   - ExtSupportedInteraction (valueCode create, update or delete; may
//     repeat): the interactions that trigger. Without it: create and
//     update, as Medplum.
//   - ExtMaxAttempts (valueInteger 1..18): delivery attempts to a URL.
//     Default DefaultMaxAttempts.
//   - ExtSuccessCodes (valueString "200,201,410-600"): the statuses that
//     count as delivered. Default 200..399.
//   - ExtSecret (valueString; ExtSecretLegacy also read): the key of the
//     X-Signature HMAC-SHA256 over the body, hex, as Medplum signs.
//
// Anything else (other channel types, FHIRPath criteria, unknown
// extensions) is refused with an error naming it.
package spec

// Package userinfo asks an external identity provider who the bearer of an
// access token is, through the provider's OpenID Connect userinfo endpoint.
// fhirgate's token exchange calls it with the subject_token a client sends.
//
// # What it does
//
// [Client.Lookup] sends GET <url> with "Authorization: Bearer <token>" and
// "Accept: application/json", within a time limit that covers the whole
// call, body included, and reads at most Options.MaxBody bytes. It accepts a
// JSON object (application/json or any application/*+json) or a JWT
// (application/jwt). A JWT body's signature is not checked, as in Medplum:
// the answer comes straight from the provider over the connection we opened
// (TLS-authenticated in production), so the signature adds nothing. When the
// Content-Type is missing or wrong but the body is a JSON object, it is
// accepted anyway, because several providers mislabel it.
//
// Redirects are followed at most 3 times and only within the same scheme,
// host and port, so the bearer token never reaches another host.
//
// # Tokens verified by signature
//
// [Client.Identify] first verifies a subject token that is a JWT against
// the provider's key set ([JWTCheck]: jwks_uri, issuer, audience), with
// lestrrat-go/jwx/v3: RS*, PS*, ES* or EdDSA only (never "none" or HMAC),
// the key its kid names with a type and curve that fit the algorithm,
// "exp" (required) and "nbf" within Options.ClockSkew, "iss", "aud" and
// "sub". It calls userinfo only when the token is not a JWT or its
// verified claims lack what the caller matches on (IdentifyRequest.Enough);
// an ID token is never sent to userinfo. Key sets are cached per URI,
// refetched after Options.JWKSRefresh and on an unknown kid, at most once
// per Options.JWKSMinRefetch whatever the tokens say, and used for up to
// Options.JWKSMaxAge while the provider cannot be reached; past that, or
// for a kid the cache lacks during an outage, the answer is
// KindUnavailable, never KindRejected.
//
// # Errors
//
// Every failure is an [*Error] whose [Kind] tells the caller what to answer:
// [KindRejected] (the provider refused the token: invalid_grant),
// [KindRateLimited] (429, with the provider's Retry-After) or
// [KindUnavailable] (anything that is the provider's or the network's fault:
// 503 temporarily_unavailable). An outage is never reported as a bad token.
// Error text never contains the token.
//
// # Caching and coalescing
//
// Successful answers are cached briefly (Options.DefaultCacheTTL), keyed by
// a SHA-256 of the cache key, the URL and the token, never the token itself.
// Failures are not cached. Concurrent lookups with the same key share one
// provider call; that call is detached from any single caller's
// cancellation (bounded by its own timeout) so one client hanging up does
// not fail the others.
//
// # Usage
//
//	c := userinfo.New(userinfo.Options{})
//	info, err := c.Lookup(ctx, userinfo.LookupRequest{
//		URL: idp.UserInfoURL, Token: subjectToken, CacheKey: clientID,
//	})
//	var uerr *userinfo.Error
//	if errors.As(err, &uerr) && uerr.Kind == userinfo.KindRejected { /* invalid_grant */ }
package userinfo

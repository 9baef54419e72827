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

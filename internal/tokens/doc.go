// Package tokens issues and verifies fhirgate's own JSON Web Tokens: the
// access, refresh and ID tokens handed out by the token exchange, signed with
// ES256 (ECDSA P-256) keys that persist in the caller's store, rotate without
// invalidating live tokens, and are published as a JWKS.
//
// # Keys
//
// A [Service] owns a key ring loaded through a [KeyStore] that the caller
// implements (fhirgate stores keys in Badger). Exactly one key signs: the
// newest active one. [Service.Rotate] creates a new active key and retires the
// previous one; a retired key keeps verifying (and stays in the JWKS) until
// Options.MaxTokenLifetime after its retirement, after which every token it
// signed has expired anyway, because no token may live longer than
// MaxTokenLifetime. [Service.Reload] picks up a rotation made by another
// replica. [Key.MarshalJWK] and [KeyFromJWK] convert key material to and from
// the flat JWK form a store can persist.
//
// # Verification
//
// [Service.Verify] accepts only compact ES256 JWS signed by a key of this
// deployment, with the issuer, type and validity window it expects, and
// reports every rejection as an [*Error] whose [Reason] is stable enough to
// label metrics. Algorithm confusion is closed by construction: the header's
// "alg" must be exactly ES256 before any key is touched, so "none", HMAC with
// the public key as the secret, and RSA never reach a verifier.
//
// Signatures are low-S only (s ≤ n/2), and tokens say so in their protected
// header ("low_s": true), so the other spelling of an ECDSA signature,
// (r, n − s), is refused on every token issued that way. Tokens issued before
// carry no marker and verify in either spelling until they expire.
//
// Verified access tokens are cached, keyed by the SHA-256 of the token's
// canonical (low-S) spelling, until their "exp": a token already seen costs
// a hash and a map lookup instead of an ECDSA verification (about 90 µs),
// and both spellings of an unmarked token are one entry. Revocation is not
// this package's business: callers must check the login (claim login_id)
// after every successful Verify, cache hit or not. Anything a caller keys
// by token should key on its claims (login_id, jti), which are the same in
// every spelling, never on the raw string.
//
// # Usage
//
//	svc, err := tokens.New(ctx, tokens.Options{Issuer: "https://fhir.example/", Keys: store})
//	tok, exp, err := svc.IssueAccess(tokens.AccessClaims{
//		Sub: userID, ClientID: clientID, LoginID: loginID,
//		Profile: "Practitioner/123", Scope: "openid offline",
//	}, time.Hour)
//	claims, err := svc.Verify(ctx, tok, tokens.KindAccess)
//	var terr *tokens.Error
//	if errors.As(err, &terr) { /* 401 invalid_token, metric label terr.Reason */ }
package tokens

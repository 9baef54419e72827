package userinfo

import (
	"context"
	"errors"
)

// IdentifyRequest is one subject token to identify, by its signature, by
// the provider's userinfo endpoint, or both.
type IdentifyRequest struct {
	// Lookup is the userinfo lookup and carries the token, timeout and
	// cache scope. Lookup.URL may be empty for a provider known only by its
	// keys; such a provider cannot identify opaque tokens.
	Lookup LookupRequest
	// JWT, when set, verifies a subject token that is a JWT locally. A
	// token that is not one still goes to userinfo.
	JWT *JWTCheck
	// IDToken says the subject token is an OpenID Connect ID token (RFC
	// 8693's id_token type). It must verify locally and is never sent to
	// userinfo, which takes access tokens only.
	IDToken bool
	// Enough reports whether a verified token carries the claims the caller
	// matches on. When it says no, userinfo is asked with the same token.
	// Nil means every verified token is enough.
	Enough func(*Info) bool
}

// Identify returns who the subject token belongs to. A JWT is verified
// against req.JWT first and userinfo is called only when that is not
// enough: the token is opaque, or its verified claims lack what
// req.Enough wants. A JWT that fails verification is refused without
// asking userinfo. Errors are [*Error], as for [Client.Lookup].
func (c *Client) Identify(ctx context.Context, req IdentifyRequest) (*Info, error) {
	if err := checkToken(req.Lookup.Token); err != nil {
		return nil, &Error{Kind: KindRejected, Err: err}
	}
	switch {
	case req.JWT != nil && req.JWT.JWKSURI != "":
		timeout := req.Lookup.Timeout
		if timeout <= 0 {
			timeout = c.timeout
		}
		info, err := c.verifyJWT(ctx, req.JWT, req.Lookup.Token, timeout)
		switch {
		case err == nil:
			if req.IDToken || req.Lookup.URL == "" || req.Enough == nil || req.Enough(info) {
				return info, nil
			}
		case !errors.Is(err, errNotJWT):
			return nil, err
		case req.IDToken:
			return nil, rejected("the ID token is not a compact JWS")
		}
	case req.IDToken:
		return nil, rejected("ID tokens are accepted only from a provider with a jwks_uri")
	}
	if req.Lookup.URL == "" {
		return nil, rejected("the subject token is not a JWT and the provider has no userinfo endpoint")
	}
	return c.Lookup(ctx, req.Lookup)
}

package userinfo

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
)

// decodeBody turns a 2xx body into claims according to its media type.
func decodeBody(contentType string, body []byte) (map[string]any, error) {
	body = bytes.TrimPrefix(body, []byte("\ufeff"))
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errors.New("empty body")
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err == nil {
		switch {
		case mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"):
			claims, err := decodeJSONObject(body)
			if err != nil {
				return nil, fmt.Errorf("decoding %s body: %w", mt, err)
			}
			return claims, nil
		case mt == "application/jwt":
			claims, err := decodeJWTPayload(body)
			if err != nil {
				return nil, fmt.Errorf("decoding application/jwt body: %w", err)
			}
			return claims, nil
		}
	}
	// Some providers send JSON as text/plain or without a type at all.
	if claims, err := decodeJSONObject(body); err == nil {
		return claims, nil
	}
	return nil, fmt.Errorf("unsupported content type %s and the body is not a JSON object", describeType(contentType))
}

func describeType(ct string) string {
	if ct == "" {
		return "(none)"
	}
	if len(ct) > 80 {
		ct = ct[:80] + "…"
	}
	return fmt.Sprintf("%q", ct)
}

// decodeJSONObject decodes exactly one JSON object, keeping numbers exact.
func decodeJSONObject(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, errors.New("not a JSON object")
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return m, nil
}

// decodeJWTPayload returns the claims of a compact JWS without checking its
// signature (see the package comment for why that is acceptable here).
func decodeJWTPayload(b []byte) (map[string]any, error) {
	parts := strings.Split(string(bytes.TrimSpace(b)), ".")
	switch len(parts) {
	case 3:
	case 5:
		return nil, errors.New("encrypted (JWE) userinfo is not supported")
	default:
		return nil, errors.New("not a compact JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil, errors.New("JWT payload is not base64url")
	}
	claims, err := decodeJSONObject(payload)
	if err != nil {
		return nil, fmt.Errorf("JWT payload: %w", err)
	}
	return claims, nil
}

func infoFrom(claims map[string]any) *Info {
	info := &Info{Raw: claims}
	switch v := claims["sub"].(type) {
	case string:
		info.Sub = v
	case json.Number:
		info.Sub = v.String()
	}
	info.Email, _ = claims["email"].(string)
	var verified, known bool
	switch v := claims["email_verified"].(type) {
	case bool:
		verified, known = v, true
	case string:
		switch strings.ToLower(v) {
		case "true":
			verified, known = true, true
		case "false":
			verified, known = false, true
		}
	}
	if known {
		info.EmailVerified = &verified
	}
	return info
}

package oauth

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// maxFormBytes bounds token-endpoint bodies. The largest legitimate field is
// a subject token (a JWT of a few KiB); 64 KiB leaves ample room.
const maxFormBytes = 64 << 10

// form is a parsed application/x-www-form-urlencoded body in which every
// parameter appears at most once.
type form map[string]string

// readForm parses a POSTed form strictly: the media type must be a form, the
// body bounded and valid UTF-8, and no parameter may repeat (RFC 6749 §3.2:
// "parameters MUST NOT be included more than once").
func readForm(r *http.Request) (form, *Error) {
	if r.Method != http.MethodPost {
		return nil, oauthErr(http.StatusMethodNotAllowed, errInvalidRequest, "method", "the token endpoint accepts POST only")
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "content_type",
			"the request body must be application/x-www-form-urlencoded")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxFormBytes+1))
	if err != nil {
		return nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "body", "reading the request body failed")
	}
	if len(body) > maxFormBytes {
		return nil, oauthErr(http.StatusRequestEntityTooLarge, errInvalidRequest, "body",
			fmt.Sprintf("the request body exceeds %d bytes", maxFormBytes))
	}
	return parseForm(string(body))
}

// parseForm decodes a form body, refusing repeated parameters and invalid
// UTF-8.
func parseForm(body string) (form, *Error) {
	values, err := url.ParseQuery(body)
	if err != nil {
		return nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "form", "the form body is not valid URL encoding")
	}
	f := make(form, len(values))
	for k, v := range values {
		if len(v) > 1 {
			return nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "form",
				fmt.Sprintf("parameter %q is repeated", printable(k)))
		}
		if !utf8.ValidString(k) || !utf8.ValidString(v[0]) {
			return nil, oauthErr(http.StatusBadRequest, errInvalidRequest, "form", "the form body is not valid UTF-8")
		}
		f[k] = v[0]
	}
	return f, nil
}

// printable shortens and cleans a client-supplied name for an error message.
func printable(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// clientCredentials returns the client id and secret from HTTP Basic
// authentication (RFC 6749 §2.3.1) or, failing that, the form.
func clientCredentials(r *http.Request, f form) (id, secret string, basic bool, e *Error) {
	if user, pass, ok := r.BasicAuth(); ok {
		u, err1 := url.QueryUnescape(user)
		p, err2 := url.QueryUnescape(pass)
		if err1 != nil || err2 != nil {
			return "", "", true, oauthErr(http.StatusUnauthorized, errInvalidClient, "client_auth", "malformed client credentials")
		}
		if fid := f["client_id"]; fid != "" && fid != u {
			return "", "", true, oauthErr(http.StatusBadRequest, errInvalidRequest, "client_id",
				"client_id in the body differs from the authenticated client")
		}
		return u, p, true, nil
	}
	return f["client_id"], f["client_secret"], false, nil
}

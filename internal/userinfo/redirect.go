package userinfo

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// maxRedirects is how many redirects a lookup follows.
const maxRedirects = 3

var (
	errOffHostRedirect  = errors.New("redirect to another host refused")
	errTooManyRedirects = fmt.Errorf("more than %d redirects", maxRedirects)
)

// checkRedirect follows a redirect only to the same scheme, host and port.
// Go drops Authorization on cross-domain redirects but keeps it for
// subdomains and other ports; we refuse before any request is sent, so the
// bearer token never leaves the provider's origin.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return errTooManyRedirects
	}
	if from, to := via[0].URL, req.URL; !sameOrigin(from, to) {
		return fmt.Errorf("%w: %s to %s", errOffHostRedirect, origin(from), origin(to))
	}
	return nil
}

func sameOrigin(a, b *url.URL) bool {
	return origin(a) == origin(b)
}

// origin is scheme://host:port, lowercased, with the default port filled in.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host + ":" + port
}

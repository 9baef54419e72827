package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"syscall"
)

// guard is the client's RoundTripper: it checks every request, redirects included (the client
// calls it for each), against the policy before the transport dials, and bounds the bodies.
type guard struct {
	policy                  *compiled
	next                    http.RoundTripper
	maxRequest, maxResponse int64
}

func (g *guard) RoundTrip(req *http.Request) (*http.Response, error) {
	u := req.URL
	host := u.Hostname()
	port := u.Port()
	if u.Scheme != "http" && u.Scheme != "https" {
		closeBody(req)
		return nil, &RefusedError{Host: u.Host, Reason: "only http and https URLs are allowed"}
	}
	if port == "" {
		port = defaultPort(u.Scheme)
	}
	hp := net.JoinHostPort(host, port)
	if _, ok := g.policy.match(u.Scheme, host, port); !ok {
		closeBody(req)
		reason := "not on the project's egress allow-list"
		if _, https := g.policy.match("https", host, port); https && u.Scheme == "http" {
			reason = "plain http is allowed only to hosts listed for http"
		}
		return nil, &RefusedError{Host: hp, Reason: reason}
	}
	if req.ContentLength > g.maxRequest {
		closeBody(req)
		return nil, fmt.Errorf("request body of %d bytes exceeds the limit of %d bytes", req.ContentLength, g.maxRequest)
	}
	if req.Body != nil && req.ContentLength < 0 {
		req = req.Clone(req.Context())
		req.Body = newLimitedBody(req.Body, g.maxRequest, "request")
	}
	resp, err := g.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = newLimitedBody(resp.Body, g.maxResponse, "response")
	return resp, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// ErrTooLarge is returned by reading a body past its bound.
var ErrTooLarge = errors.New("body too large")

// limitedBody errors once more than left bytes are read.
type limitedBody struct {
	r         io.ReadCloser
	left, max int64
	what      string
}

func newLimitedBody(r io.ReadCloser, max int64, what string) *limitedBody {
	return &limitedBody{r: r, left: max, max: max, what: what}
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, fmt.Errorf("%w: the %s body exceeds %d bytes", ErrTooLarge, b.what, b.max)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n - int(-b.left), fmt.Errorf("%w: the %s body exceeds %d bytes", ErrTooLarge, b.what, b.max)
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.r.Close() }

// dialer resolves, checks and connects: the only way the transport opens connections.
type dialer struct {
	policy   *compiled
	resolver Resolver
}

func (d *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	r, ok := d.policy.match("", host, port)
	if !ok {
		return nil, &RefusedError{Host: addr, Reason: "not on the project's egress allow-list"}
	}
	addrs, err := d.addresses(ctx, host, r)
	if err != nil {
		return nil, err
	}
	checked := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		checked[a] = true
	}
	nd := &net.Dialer{
		Timeout: defaultDialTimeout,
		// The socket's peer is checked once more right before connect: whatever path led here,
		// only an address checked above is ever connected to.
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !checked[ap.Addr().Unmap()] {
				return &RefusedError{Host: address, Reason: "address was not checked"}
			}
			return nil
		},
	}
	var firstErr error
	for _, a := range addrs {
		c, err := nd.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// addresses resolves host (once) and checks every address; one refused address refuses all.
func (d *dialer) addresses(ctx context.Context, host string, r rule) ([]netip.Addr, error) {
	if r.addr.IsValid() {
		// Listed by address: explicit, whatever range it is in (but never one no listing opens).
		if neverAllowed(r.addr) {
			return nil, &RefusedError{Host: host, Reason: r.addr.String() + " can never be reached"}
		}
		return []netip.Addr{r.addr}, nil
	}
	rctx, cancel := context.WithTimeout(ctx, defaultDialTimeout)
	defer cancel()
	addrs, err := d.resolver.LookupNetIP(rctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolving %s: no addresses", host)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if neverAllowed(a) {
			return nil, &RefusedError{Host: host, Reason: "it resolves to " + a.String() + ", which can never be reached"}
		}
		if what, md := classify(a); what != "" && !d.policy.privateAllowed(a, md) {
			return nil, &RefusedError{Host: host, Reason: "it resolves to " + a.String() + ", " + what}
		}
		out = append(out, a)
	}
	return out, nil
}

// netResolver is net.DefaultResolver behind the Resolver interface.
type netResolver struct{}

func (netResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

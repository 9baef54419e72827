package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Policy is a project's allow-list. An entry is `host` or `host:port`: a DNS name, a `*.`
// wildcard of one label (`*.example.com` matches `a.example.com`, not `example.com` nor
// `a.b.example.com`), or an IP address (IPv6 in brackets when it has a port). Without a port an
// entry allows the scheme's default port (443 for https, 80 for http).
type Policy struct {
	// Allow lists the hosts reachable over https.
	Allow []string
	// AllowHTTP lists the hosts reachable over http, and over https too.
	AllowHTTP []string
	// AllowPrivate lists addresses or CIDR ranges that allowed DNS names may resolve to although
	// they are private, loopback or otherwise special (a cloud metadata address only when the
	// entry is that single address). An IP-literal entry of Allow or AllowHTTP needs no
	// AllowPrivate entry: listing it is explicit already.
	AllowPrivate []string
}

// IsEmpty reports whether p allows nothing.
func (p *Policy) IsEmpty() bool {
	return p == nil || len(p.Allow) == 0 && len(p.AllowHTTP) == 0
}

// Check reports the first malformed entry of p.
func (p *Policy) Check() error {
	_, err := compile(p)
	return err
}

// key is a fingerprint of p: equal policies have equal keys.
func (p *Policy) key() string {
	if p == nil {
		return ""
	}
	return strings.Join(p.Allow, " ") + "|" + strings.Join(p.AllowHTTP, " ") + "|" + strings.Join(p.AllowPrivate, " ")
}

// EntryError is a malformed entry of a Policy.
type EntryError struct {
	List  string // allow, allow_http or allow_private (the Caddyfile's names)
	Entry string
	Err   error
}

func (e *EntryError) Error() string { return fmt.Sprintf("%s '%s': %v", e.List, e.Entry, e.Err) }

func (e *EntryError) Unwrap() error { return e.Err }

// rule is one parsed host entry.
type rule struct {
	host     string     // lower case, no trailing dot; for a wildcard the suffix after "*"
	wildcard bool       // host is ".example.com" and one more label is required
	addr     netip.Addr // valid for an IP-literal entry
	port     string     // "" = the scheme's default port
	http     bool       // from AllowHTTP: http allowed too
}

// compiled is a Policy ready to check requests and addresses.
type compiled struct {
	rules   []rule
	private []netip.Prefix
}

func compile(p *Policy) (*compiled, error) {
	c := new(compiled)
	if p == nil {
		return c, nil
	}
	for _, list := range []struct {
		name    string
		entries []string
		http    bool
	}{{"allow", p.Allow, false}, {"allow_http", p.AllowHTTP, true}} {
		for _, e := range list.entries {
			r, err := parseRule(e)
			if err != nil {
				return nil, &EntryError{List: list.name, Entry: e, Err: err}
			}
			r.http = list.http
			c.rules = append(c.rules, r)
		}
	}
	for _, e := range p.AllowPrivate {
		pfx, err := parsePrefix(e)
		if err != nil {
			return nil, &EntryError{List: "allow_private", Entry: e, Err: err}
		}
		c.private = append(c.private, pfx)
	}
	return c, nil
}

func parseRule(e string) (rule, error) {
	var r rule
	host, port := e, ""
	if h, p, err := net.SplitHostPort(e); err == nil {
		host, port = h, p
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
			return r, fmt.Errorf("invalid port '%s'", p)
		}
	} else if strings.HasPrefix(e, "[") && strings.HasSuffix(e, "]") {
		host = e[1 : len(e)-1]
	}
	if host == "" {
		return r, fmt.Errorf("empty host")
	}
	r.port = port
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return r, fmt.Errorf("an address with a zone is not allowed")
		}
		r.addr = a.Unmap()
		return r, nil
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.wildcard, host = true, rest
	}
	if !validName(host) {
		return r, fmt.Errorf("'%s' is not a host name, a '*.' wildcard or an IP address", host)
	}
	if r.wildcard {
		host = "." + host
	}
	r.host = host
	return r, nil
}

// validName accepts DNS names of letters, digits, hyphens and underscores, with at least one
// label.
func validName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func parsePrefix(e string) (netip.Prefix, error) {
	if strings.Contains(e, "/") {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return p, err
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(e)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// defaultPort is the port a URL of scheme means without one.
func defaultPort(scheme string) string {
	if scheme == "http" {
		return "80"
	}
	return "443"
}

// match returns the rule allowing scheme://host:port, if any. scheme "" matches whatever
// scheme the rule allows (the dialer's check, which sees no scheme), with an explicit or any
// default port.
func (c *compiled) match(scheme, host, port string) (rule, bool) {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	a, err := netip.ParseAddr(host)
	isAddr := err == nil
	for _, r := range c.rules {
		switch {
		case r.addr.IsValid():
			if !isAddr || a.Unmap() != r.addr {
				continue
			}
		case isAddr:
			continue
		case r.wildcard:
			sub, ok := strings.CutSuffix(host, r.host)
			if !ok || sub == "" || strings.Contains(sub, ".") {
				continue
			}
		case host != r.host:
			continue
		}
		if scheme == "http" && !r.http {
			continue
		}
		switch {
		case r.port == port:
		case r.port != "":
			continue
		case scheme != "" && port == defaultPort(scheme):
		case scheme == "" && (port == "443" || r.http && port == "80"):
		default:
			continue
		}
		return r, true
	}
	return rule{}, false
}

// privateAllowed reports whether a is in an AllowPrivate range; a metadata address only when
// the range is that address alone.
func (c *compiled) privateAllowed(a netip.Addr, metadata bool) bool {
	for _, p := range c.private {
		if !p.Contains(a) {
			continue
		}
		if !metadata || p.Bits() == a.BitLen() {
			return true
		}
	}
	return false
}

package egress

import (
	"net/netip"
)

// special is a range of addresses a request may not reach unless the operator lists them.
type special struct {
	prefix netip.Prefix
	what   string
}

var specialRanges = func() []special {
	var out []special
	add := func(what string, prefixes ...string) {
		for _, p := range prefixes {
			out = append(out, special{netip.MustParsePrefix(p), what})
		}
	}
	add("a loopback address", "127.0.0.0/8", "::1/128")
	add("a private address", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
	add("a link-local address", "169.254.0.0/16", "fe80::/10")
	add("a unique-local address", "fc00::/7", "fec0::/10")
	add("a carrier-grade NAT address", "100.64.0.0/10")
	add("a reserved address", "0.0.0.0/8", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "::/128", "100::/64", "2001::/32",
		"2001:db8::/32", "64:ff9b:1::/48")
	add("a multicast address", "224.0.0.0/4", "ff00::/8")
	return out
}()

// metadataAddrs are cloud instance metadata services: reachable only when listed by themselves.
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OpenStack, …
	netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task metadata
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS over IPv6
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	netip.MustParseAddr("192.0.0.192"):     true, // Oracle Cloud
}

// neverReachable are ranges no listing opens: connecting to them is never what an operator means.
var neverReachable = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"), // "this host": 0.0.0.0 reaches the local machine on Linux
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("ff00::/8"),
}

// classify returns what makes a special ("" for an ordinary public address) and whether it is
// a metadata address. Addresses that embed an IPv4 address (IPv4-mapped, NAT64, 6to4) are
// judged by it too.
func classify(a netip.Addr) (what string, metadata bool) {
	a = a.Unmap()
	if metadataAddrs[a] {
		return "a cloud metadata address", true
	}
	for _, s := range specialRanges {
		if s.prefix.Contains(a) {
			return s.what, false
		}
	}
	if v4, ok := embeddedIPv4(a); ok {
		if what, md := classify(v4); what != "" {
			return what + " (embedded in " + a.String() + ")", md
		}
	}
	return "", false
}

var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	sixto4 = netip.MustParsePrefix("2002::/16")
)

// embeddedIPv4 extracts the IPv4 address a NAT64 or 6to4 address carries.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixto4.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

func neverAllowed(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range neverReachable {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

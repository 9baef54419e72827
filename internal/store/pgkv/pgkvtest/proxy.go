package pgkvtest

import (
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Proxy forwards loopback connections to a PostgreSQL server until Cut,
// standing in for a server that goes away and comes back (the shared test
// server itself is never stopped: others use it).
type Proxy struct {
	ln           net.Listener
	addr, target string
	mu           sync.Mutex
	conns        []net.Conn
}

// FreeAddr returns a loopback address with a free port, for a Proxy that
// is cut and started again on the same address.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("finding a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// ProxyFor starts a Proxy on a free loopback port in front of dsn's
// server; proxied is dsn pointed at it. The proxy is cut when tb ends.
func ProxyFor(tb testing.TB, dsn string) (p *Proxy, proxied string) {
	tb.Helper()
	addr := FreeAddr(tb)
	proxied, target := ViaProxy(tb, dsn, addr)
	return StartProxy(tb, addr, target), proxied
}

// Restart starts a proxy again on p's address, to the same server: the
// server is back.
func (p *Proxy) Restart(tb testing.TB) *Proxy {
	tb.Helper()
	return StartProxy(tb, p.addr, p.target)
}

// StartProxy listens on addr and forwards every connection to target. It
// is cut when the test ends.
func StartProxy(tb testing.TB, addr, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatalf("proxy: %v", err)
	}
	p := &Proxy{ln: ln, addr: addr, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
			go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
		}
	}()
	tb.Cleanup(p.Cut)
	return p
}

// Cut refuses new connections and breaks the open ones.
func (p *Proxy) Cut() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// ViaProxy returns dsn pointed at addr instead of its server, and the
// server's address.
func ViaProxy(tb testing.TB, dsn, addr string) (proxied, target string) {
	tb.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	target = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	host, port, _ := net.SplitHostPort(addr)
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Host = addr
		return u.String(), target
	}
	return dsn + " host=" + host + " port=" + port, target
}

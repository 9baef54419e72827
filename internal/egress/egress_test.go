package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

// fakeResolver answers names from a table, as a DNS server an attacker controls would.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := f[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

func serve(t *testing.T, h http.HandlerFunc) (port string) {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	u, _ := url.Parse(s.URL)
	return u.Port()
}

func get(t *testing.T, e *Egress, project, rawURL string) (int, []byte, error) {
	t.Helper()
	c, err := e.For(project)
	if err != nil {
		t.Fatalf("For: %v", err)
	}
	resp, err := c.Get(rawURL)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func TestEgressAgainstLoopbackServers(t *testing.T) {
	ok := serve(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") })
	other := serve(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "secret") })
	redirect := serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	huge := serve(t, func(w http.ResponseWriter, r *http.Request) {
		chunk := strings.Repeat("x", 64<<10)
		for i := 0; i < 64; i++ { // 4 MiB
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	})
	policies := map[string]*Policy{
		"named": {
			AllowHTTP:    []string{"api.test:" + ok, "api.test:" + redirect, "api.test:" + slow, "api.test:" + huge, "evil.test:" + ok, "localhost:" + ok},
			AllowPrivate: []string{"127.0.0.2"}, // not the address api.test resolves to
		},
		"private": {
			AllowHTTP:    []string{"api.test:" + ok, "api.test:" + redirect},
			AllowPrivate: []string{"127.0.0.0/8"},
		},
		"literal":   {AllowHTTP: []string{"127.0.0.1:" + ok, "127.0.0.1:" + redirect}},
		"httpsOnly": {Allow: []string{"127.0.0.1:" + ok}},
	}
	e := New(Options{
		Lookup:           func(p string) (*Policy, error) { return policies[p], nil },
		Resolver:         fakeResolver{"api.test": {"127.0.0.1"}, "evil.test": {"93.184.216.34", "127.0.0.1"}, "localhost": {"127.0.0.1"}},
		Timeout:          2 * time.Second,
		MaxResponseBytes: 1 << 20,
	})

	cases := []struct {
		name, project, url string
		want               string // body, when the request succeeds
		refused            string // part of the RefusedError, when refused
		err                error  // errors.Is, for other failures
	}{
		{name: "allowed name whose address is listed as private", project: "private", url: "http://api.test:" + ok + "/", want: "hello"},
		{name: "explicitly listed 127.0.0.1", project: "literal", url: "http://127.0.0.1:" + ok + "/", want: "hello"},
		{name: "host not on the list", project: "literal", url: "http://127.0.0.1:" + other + "/", refused: "not on the project's egress allow-list"},
		{name: "project without a policy", project: "none", url: "http://127.0.0.1:" + ok + "/", refused: "not on the project's egress allow-list"},
		{name: "listed name resolving to 127.0.0.1", project: "named", url: "http://api.test:" + ok + "/", refused: "resolves to 127.0.0.1, a loopback address"},
		{name: "listed name with one loopback address among public ones", project: "named", url: "http://evil.test:" + ok + "/", refused: "127.0.0.1, a loopback address"},
		{name: "localhost", project: "named", url: "http://localhost:" + ok + "/", refused: "loopback"},
		{name: "plain http to an https-only entry", project: "httpsOnly", url: "http://127.0.0.1:" + ok + "/", refused: "plain http is allowed only"},
		{name: "redirect to a refused host", project: "literal", url: "http://127.0.0.1:" + redirect + "/?to=" + url.QueryEscape("http://127.0.0.1:"+other+"/"), refused: "127.0.0.1:" + other},
		{name: "redirect to a name resolving to loopback", project: "private", url: "http://api.test:" + redirect + "/?to=" + url.QueryEscape("http://evil.test:"+ok+"/"), refused: "not on the project's egress allow-list"},
		{name: "redirect to an allowed host", project: "literal", url: "http://127.0.0.1:" + redirect + "/?to=" + url.QueryEscape("http://127.0.0.1:"+ok+"/"), want: "hello"},
		{name: "scheme other than http", project: "literal", url: "ftp://127.0.0.1:" + ok + "/", refused: "only http and https"},
		{name: "huge response", project: "named-huge", url: "http://api.test:" + huge + "/", err: ErrTooLarge},
	}
	policies["named-huge"] = &Policy{AllowHTTP: []string{"api.test:" + huge}, AllowPrivate: []string{"127.0.0.1"}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, body, err := get(t, e, tc.project, tc.url)
			var re *RefusedError
			switch {
			case tc.refused != "":
				if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("want refused (%q), got body %q, err %v", tc.refused, body, err)
				}
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("want %v, got body of %d bytes, err %v", tc.err, len(body), err)
				}
			default:
				if err != nil || string(body) != tc.want {
					t.Fatalf("want %q, got %q, %v", tc.want, body, err)
				}
			}
		})
	}

	t.Run("slow response stops at the timeout", func(t *testing.T) {
		policies["slow"] = &Policy{AllowHTTP: []string{"api.test:" + slow}, AllowPrivate: []string{"127.0.0.1"}}
		fast := New(Options{
			Lookup:   func(p string) (*Policy, error) { return policies[p], nil },
			Resolver: fakeResolver{"api.test": {"127.0.0.1"}},
			Timeout:  100 * time.Millisecond,
		})
		_, _, err := get(t, fast, "slow", "http://api.test:"+slow+"/")
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("want a timeout, got %v", err)
		}
	})

	t.Run("slow response stops with the caller's context", func(t *testing.T) {
		policies["named-slow-ctx"] = &Policy{AllowHTTP: []string{"api.test:" + slow}, AllowPrivate: []string{"127.0.0.1"}}
		c, _ := e.For("named-slow-ctx")
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test:"+slow+"/", nil)
		_, err := c.Do(req)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("want the context's deadline, got %v", err)
		}
	})

	t.Run("request body over the bound", func(t *testing.T) {
		small := New(Options{Lookup: func(p string) (*Policy, error) { return policies[p], nil }, MaxRequestBytes: 10})
		c, _ := small.For("literal")
		_, err := c.Post("http://127.0.0.1:"+ok+"/", "text/plain", strings.NewReader(strings.Repeat("y", 11)))
		if err == nil || !strings.Contains(err.Error(), "exceeds the limit of 10 bytes") {
			t.Fatalf("want the request refused, got %v", err)
		}
	})

	t.Run("redirects are bounded", func(t *testing.T) {
		loop := serve(t, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/again", http.StatusFound) })
		policies["loop"] = &Policy{AllowHTTP: []string{"127.0.0.1:" + loop}}
		_, _, err := get(t, e, "loop", "http://127.0.0.1:"+loop+"/")
		if err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") {
			t.Fatalf("want the redirects stopped, got %v", err)
		}
	})

	t.Run("a changed policy takes effect", func(t *testing.T) {
		policies["changing"] = &Policy{AllowHTTP: []string{"127.0.0.1:" + ok}}
		if _, _, err := get(t, e, "changing", "http://127.0.0.1:"+ok+"/"); err != nil {
			t.Fatal(err)
		}
		policies["changing"] = &Policy{AllowHTTP: []string{"127.0.0.1:" + other}}
		if _, _, err := get(t, e, "changing", "http://127.0.0.1:"+ok+"/"); err == nil {
			t.Fatal("the removed host is still reachable")
		}
	})
}

func TestClassify(t *testing.T) {
	cases := []struct {
		addr     string
		what     string // "" for public
		metadata bool
	}{
		{"93.184.216.34", "", false},
		{"2606:2800:220:1:248:1893:25c8:1946", "", false},
		{"127.0.0.1", "a loopback address", false},
		{"::1", "a loopback address", false},
		{"::ffff:127.0.0.1", "a loopback address", false},
		{"10.1.2.3", "a private address", false},
		{"172.31.0.1", "a private address", false},
		{"192.168.1.1", "a private address", false},
		{"169.254.1.1", "a link-local address", false},
		{"fe80::1", "a link-local address", false},
		{"fd12::1", "a unique-local address", false},
		{"100.64.0.1", "a carrier-grade NAT address", false},
		{"169.254.169.254", "a cloud metadata address", true},
		{"fd00:ec2::254", "a cloud metadata address", true},
		{"100.100.100.200", "a cloud metadata address", true},
		{"64:ff9b::7f00:1", "a loopback address (embedded in 64:ff9b::7f00:1)", false},
		{"2002:a9fe:a9fe::", "a cloud metadata address (embedded in 2002:a9fe:a9fe::)", true},
		{"224.0.0.1", "a multicast address", false},
		{"0.0.0.0", "a reserved address", false},
	}
	for _, tc := range cases {
		t.Run(tc.addr, func(t *testing.T) {
			what, md := classify(netip.MustParseAddr(tc.addr))
			if what != tc.what || md != tc.metadata {
				t.Fatalf("classify(%s) = %q, %v; want %q, %v", tc.addr, what, md, tc.what, tc.metadata)
			}
		})
	}
}

func TestPolicyMatch(t *testing.T) {
	p, err := compile(&Policy{
		Allow:     []string{"api.example.com", "*.hooks.example.org:8443", "[2001:db8::1]:443"},
		AllowHTTP: []string{"10.0.0.5:8080", "Plain.Example.NET"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		scheme, host, port string
		want               bool
	}{
		{"https", "api.example.com", "443", true},
		{"https", "API.example.com.", "443", true},
		{"https", "api.example.com", "8443", false},
		{"http", "api.example.com", "80", false},
		{"https", "a.hooks.example.org", "8443", true},
		{"https", "hooks.example.org", "8443", false},
		{"https", "a.b.hooks.example.org", "8443", false},
		{"https", "2001:db8::1", "443", true},
		{"http", "10.0.0.5", "8080", true},
		{"https", "10.0.0.5", "8080", true},
		{"http", "10.0.0.5", "80", false},
		{"http", "plain.example.net", "80", true},
		{"https", "plain.example.net", "443", true},
		{"http", "plain.example.net", "443", false},
		{"https", "evil.com", "443", false},
		{"https", "api.example.com.evil.com", "443", false},
	}
	for _, tc := range cases {
		if _, got := p.match(tc.scheme, tc.host, tc.port); got != tc.want {
			t.Errorf("match(%s://%s:%s) = %v, want %v", tc.scheme, tc.host, tc.port, got, tc.want)
		}
	}
}

func TestPolicyCheckRejectsMalformedEntries(t *testing.T) {
	cases := map[string]*Policy{
		"allow 'exa mple.com': 'exa mple.com' is not a host name": {Allow: []string{"exa mple.com"}},
		"allow 'api.example.com:0': invalid port '0'":             {Allow: []string{"api.example.com:0"}},
		"allow 'https://api.example.com'":                         {Allow: []string{"https://api.example.com"}},
		"allow_http '*.*.example.com'":                            {AllowHTTP: []string{"*.*.example.com"}},
		"allow_http ':80': empty host":                            {AllowHTTP: []string{":80"}},
		"allow_private '10.0.0.0/33'":                             {AllowPrivate: []string{"10.0.0.0/33"}},
	}
	for want, p := range cases {
		err := p.Check()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%+v) = %v, want it to name %q", p, err, want)
		}
	}
	if err := (&Policy{Allow: []string{"api.example.com", "*.example.org:8443", "[::1]:80", "::1"}, AllowPrivate: []string{"10.0.0.0/8", "fd00::1"}}).Check(); err != nil {
		t.Fatalf("valid policy refused: %v", err)
	}
}

func TestMetadataAddressOnlyWhenListedByItself(t *testing.T) {
	r := fakeResolver{"meta.test": {"169.254.169.254"}}
	for _, tc := range []struct {
		private []string
		ok      bool
	}{
		{nil, false},
		{[]string{"169.254.0.0/16"}, false},
		{[]string{"169.254.169.254"}, true},
	} {
		cp, err := compile(&Policy{Allow: []string{"meta.test"}, AllowPrivate: tc.private})
		if err != nil {
			t.Fatal(err)
		}
		d := &dialer{policy: cp, resolver: r}
		rl, _ := cp.match("https", "meta.test", "443")
		_, err = d.addresses(context.Background(), "meta.test", rl)
		if (err == nil) != tc.ok {
			t.Errorf("allow_private %v: err %v, want allowed %v", tc.private, err, tc.ok)
		}
	}
}

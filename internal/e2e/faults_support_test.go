package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"
)

// Shared by the fault, crash, reload and disk suites.
//
// Every suite runs briefly in CI. FHIRGATE_SOAK makes them run longer by
// hand: "1" (or "true") means a few minutes each, a Go duration ("10m")
// sets the length. FHIRGATE_KNOWN_BUGS=1 runs the cases that are skipped
// because they fail on a known product bug, to reproduce it.

// soakDuration is how long a suite's repeated part runs: short in CI, or
// what FHIRGATE_SOAK asks for.
func soakDuration(t *testing.T, short, long time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv("FHIRGATE_SOAK")
	switch v {
	case "", "0", "false":
		return short
	case "1", "true":
		return long
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("FHIRGATE_SOAK=%q: want 1 or a positive Go duration", v)
	}
	return d
}

// soaking tells whether FHIRGATE_SOAK asks for a long run.
func soaking() bool {
	v := os.Getenv("FHIRGATE_SOAK")
	return v != "" && v != "0" && v != "false"
}

// knownBug skips the rest of a case that fails on a product bug, unless
// FHIRGATE_KNOWN_BUGS=1 asks to run it anyway (to reproduce or to check a
// fix). The reason starts with "BUG:" and says what goes wrong.
func knownBug(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("FHIRGATE_KNOWN_BUGS") == "1" {
		t.Logf("running a known bug case: %s", reason)
		return
	}
	t.Skip(reason)
}

// faultConfig is the data of the suites' own Caddyfile templates.
type faultConfig struct {
	stackConfig
	Storage string // storage_dir
}

// writeCaddyfile renders a Caddyfile template into a file named Caddyfile
// (so `caddy reload --config` picks the Caddyfile adapter).
func writeCaddyfile(t *testing.T, dir, tmpl string, data any) string {
	t.Helper()
	path := filepath.Join(dir, "Caddyfile")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := template.Must(template.New("caddyfile").Parse(tmpl)).Execute(f, data); err != nil {
		t.Fatal(err)
	}
	return path
}

// startStackFrom starts Caddy on one of the suites' own templates. The
// returned stack has no idp or backend of the stack_test.go kind: the
// caller owns the fake servers it put in cfg.
func startStackFrom(t *testing.T, tmpl string, cfg faultConfig) *stack {
	t.Helper()
	if cfg.Admin == 0 {
		cfg.Admin = freePort(t)
	}
	if cfg.Gateway == 0 {
		cfg.Gateway = freePort(t)
	}
	if cfg.Testdata == "" {
		cfg.Testdata, _ = filepath.Abs("testdata")
	}
	path := writeCaddyfile(t, t.TempDir(), tmpl, cfg)
	p := startCaddy(t, path, cfg.Admin)
	// Runs before Caddy is stopped: a connection the client dialled but
	// never used holds a graceful shutdown for 5 s (net/http treats a new
	// connection as active until then).
	t.Cleanup(loadClient.CloseIdleConnections)
	return &stack{caddyProc: p, config: path, gateway: "http://localhost:" + strconv.Itoa(cfg.Gateway)}
}

// alive tells whether the Caddy process is still running.
func (p *caddyProc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// loadClient is for requests made off the test goroutine and for requests
// that may hang: it never retries on its own beyond what net/http does for
// requests that provably never reached the server, and it gives up late
// enough that only a real hang trips it.
var loadClient = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second},
}

// try sends one request and reports transport errors instead of failing
// the test, so it can run on any goroutine.
func try(method, url, contentType, body string, headers ...string) (response, error) {
	return tryWith(loadClient, method, url, contentType, body, headers...)
}

func tryWith(c *http.Client, method, url, contentType, body string, headers ...string) (response, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return response{}, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// delivery is how net/http got one request to the server.
type delivery struct {
	// conns counts the connections the request was sent on: above 1,
	// net/http retried it on its own.
	conns int
	// retriedAfterWrite is set when an earlier attempt had written the
	// whole request before its connection failed: the server may have
	// received it, so the retry is one a client is not allowed to make
	// for a non-idempotent request (net/http does it for GET).
	retriedAfterWrite bool
}

// tryTraced is try that also reports net/http's own retries.
func tryTraced(method, url, contentType, body string, headers ...string) (response, delivery, error) {
	var mu sync.Mutex
	var d delivery
	wrote := false
	trace := &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) {
			mu.Lock()
			defer mu.Unlock()
			d.conns++
			if d.conns > 1 && wrote {
				d.retriedAfterWrite = true
			}
			wrote = false
		},
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			mu.Lock()
			defer mu.Unlock()
			wrote = i.Err == nil
		},
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), method, url, strings.NewReader(body))
	if err != nil {
		return response{}, d, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := loadClient.Do(req)
	if err == nil {
		defer resp.Body.Close()
		var b []byte
		if b, err = io.ReadAll(resp.Body); err == nil {
			mu.Lock()
			defer mu.Unlock()
			return response{status: resp.StatusCode, header: resp.Header, body: b}, d, nil
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return response{}, d, err
}

// exchangeForm is an RFC 8693 token-exchange request body.
func exchangeForm(client, subject string) string {
	return url.Values{
		"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"client_id":          {client},
		"subject_token":      {subject},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}.Encode()
}

// exchange sends one token exchange and reports how long it took.
func (s *stack) exchange(client, subject string) (response, time.Duration, error) {
	start := time.Now()
	r, err := try("POST", s.gateway+"/oauth2/token", "application/x-www-form-urlencoded", exchangeForm(client, subject))
	return r, time.Since(start), err
}

// jsonField decodes a JSON object body and returns one top-level string
// field, "" when it is not there.
func jsonField(body []byte, name string) string {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	s, _ := m[name].(string)
	return s
}

// faultServer is a loopback HTTP server on a fixed port that can go down
// (listener and connections closed: connection refused) and come back on
// the same port, so the gateway's configured URL stays valid.
type faultServer struct {
	t       *testing.T
	addr    string
	handler http.Handler
	mu      sync.Mutex
	srv     *http.Server
	// stop is closed when the test ends, to release handlers that hang.
	stop chan struct{}
}

func newFaultServer(t *testing.T, h http.Handler) *faultServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &faultServer{t: t, addr: ln.Addr().String(), handler: h, stop: make(chan struct{})}
	f.serve(ln)
	t.Cleanup(func() {
		close(f.stop)
		f.down()
	})
	return f
}

func (f *faultServer) URL() string { return "http://" + f.addr }

func (f *faultServer) serve(ln net.Listener) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.srv = &http.Server{Handler: f.handler, ReadHeaderTimeout: 10 * time.Second}
	go func(srv *http.Server) { _ = srv.Serve(ln) }(f.srv)
}

// down closes the listener and every connection: new connections are
// refused, pooled ones see their peer gone.
func (f *faultServer) down() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv != nil {
		_ = f.srv.Close()
		f.srv = nil
	}
}

// up listens again on the same address.
func (f *faultServer) up() {
	f.t.Helper()
	var ln net.Listener
	var err error
	// The port was ours a moment ago; on loopback it is free again at once
	// (Go listeners set SO_REUSEADDR), but allow a short retry.
	for range 50 {
		if ln, err = net.Listen("tcp", f.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		f.t.Fatalf("re-listening on %s: %v", f.addr, err)
	}
	f.serve(ln)
}

// resetConn aborts a request's connection with a TCP RST (SO_LINGER 0)
// instead of answering.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err) // HTTP/1 test servers always allow hijacking
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// waitOrStop blocks until the request is abandoned by its client or the
// test ends, as a server that never answers does.
func (f *faultServer) waitOrStop(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.stop:
	}
}

// adminList returns the ids of every record of a type, through the admin
// API.
func (s *stack) adminList(t *testing.T, typ string) map[string]bool {
	t.Helper()
	r := do(t, "GET", "http://"+s.adminAddr+"/fhirgate/"+typ, "", "")
	if r.status != 200 {
		t.Fatalf("listing %s: %d %s", typ, r.status, r.body)
	}
	var b struct {
		Entry []struct {
			Resource struct {
				ID string `json:"id"`
			} `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("listing %s: %v", typ, err)
	}
	ids := map[string]bool{}
	for _, e := range b.Entry {
		ids[e.Resource.ID] = true
	}
	return ids
}

// errorLines returns the log lines at level error or above, and lines that
// speak of corruption or a directory lock, from a Caddy log.
func errorLines(logs string) []string {
	var out []string
	for line := range strings.Lines(logs) {
		l := strings.ToLower(line)
		if strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"fatal"`) ||
			strings.Contains(l, `"level":"panic"`) || strings.Contains(l, "corrupt") ||
			strings.Contains(l, "checksum") || strings.Contains(l, "locked") ||
			strings.Contains(l, "directory lock") || strings.HasPrefix(l, "panic:") ||
			strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "unexpected fault address") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

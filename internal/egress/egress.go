package egress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Defaults for the zero values of Options.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultMaxRedirects     = 10
	DefaultMaxRequestBytes  = 10 << 20
	DefaultMaxResponseBytes = 10 << 20
	defaultDialTimeout      = 10 * time.Second
	defaultHeaderBytes      = 64 << 10
)

// Resolver resolves host names; *net.Resolver is one. Tests give their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configures an Egress. Lookup is required; the rest may be zero for defaults.
type Options struct {
	// Lookup returns the project's allow-list; nil (or an empty Policy) refuses everything. An
	// error is returned by For.
	Lookup func(projectID string) (*Policy, error)
	// Resolver resolves names. Default: net.DefaultResolver.
	Resolver Resolver
	// Timeout bounds one request, redirects and reading the body included. Default: 30s.
	Timeout time.Duration
	// MaxRedirects bounds the redirects one request follows. Default: 10; negative: none.
	MaxRedirects int
	// MaxRequestBytes bounds a request body. Default: 10 MiB.
	MaxRequestBytes int64
	// MaxResponseBytes bounds a response body (after decompression): reading more is an error.
	// Default: 10 MiB.
	MaxResponseBytes int64
}

// Egress hands out each project's HTTP client. It is safe for concurrent use.
type Egress struct {
	o Options

	mu      sync.Mutex
	clients map[string]*projectClient
}

type projectClient struct {
	key    string
	client *http.Client
}

// New returns an Egress with o's zero fields set to their defaults.
func New(o Options) *Egress {
	if o.Resolver == nil {
		o.Resolver = netResolver{}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxRedirects == 0 {
		o.MaxRedirects = DefaultMaxRedirects
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	return &Egress{o: o, clients: map[string]*projectClient{}}
}

// MaxRequestBytes is the bound on a request body (Options.MaxRequestBytes after defaults).
func (e *Egress) MaxRequestBytes() int64 { return e.o.MaxRequestBytes }

// MaxResponseBytes is the bound on a response body (Options.MaxResponseBytes after defaults).
func (e *Egress) MaxResponseBytes() int64 { return e.o.MaxResponseBytes }

// For returns the HTTP client of a project: it reaches only what the project's Policy allows.
// The client is reused while the Policy stays the same, so connections are pooled.
func (e *Egress) For(projectID string) (*http.Client, error) {
	if e.o.Lookup == nil {
		return nil, errors.New("egress: no policy lookup configured")
	}
	p, err := e.o.Lookup(projectID)
	if err != nil {
		return nil, fmt.Errorf("loading the egress policy of project %s: %w", projectID, err)
	}
	key := p.key()
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.clients[projectID]; c != nil && c.key == key {
		return c.client, nil
	}
	cp, err := compile(p)
	if err != nil {
		return nil, fmt.Errorf("egress policy of project %s: %w", projectID, err)
	}
	if old := e.clients[projectID]; old != nil {
		old.client.CloseIdleConnections()
	}
	c := &projectClient{key: key, client: e.newClient(cp)}
	e.clients[projectID] = c
	return c.client, nil
}

// Client returns a client bound to p, not cached: for a caller with a policy of its own.
func (e *Egress) Client(p *Policy) (*http.Client, error) {
	cp, err := compile(p)
	if err != nil {
		return nil, err
	}
	return e.newClient(cp), nil
}

func (e *Egress) newClient(cp *compiled) *http.Client {
	d := &dialer{policy: cp, resolver: e.o.Resolver}
	tr := &http.Transport{
		Proxy:                  nil, // an environment proxy would reach hosts unchecked
		DialContext:            d.DialContext,
		TLSHandshakeTimeout:    defaultDialTimeout,
		ResponseHeaderTimeout:  e.o.Timeout,
		MaxResponseHeaderBytes: defaultHeaderBytes,
		MaxIdleConns:           32,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		ForceAttemptHTTP2:      true,
	}
	maxRedirects := e.o.MaxRedirects
	return &http.Client{
		Transport: &guard{policy: cp, next: tr, maxRequest: e.o.MaxRequestBytes, maxResponse: e.o.MaxResponseBytes},
		Timeout:   e.o.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("stopped after %d redirects", max(maxRedirects, 0))
			}
			return nil
		},
	}
}

// RefusedError is a request or connection the policy refused.
type RefusedError struct {
	Host   string // host:port, or the URL's host
	Reason string
}

func (e *RefusedError) Error() string {
	return "egress to " + e.Host + " refused: " + e.Reason
}

package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/fhirgate/fhirgate/internal/botapi"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
)

// Runs with no HTTP request of their own (MLLP messages, queued async
// $execute runs, and the Subscription and cron runs) reach the FHIR
// backend through a handler's gateway.BackendFor, which carries each call
// in a request sent through the Caddy HTTP server that holds the handler,
// from the start of its routes (see internal/gateway/backend_route.go).
// Going through the server rather than calling the reverse proxy directly
// is what makes such a call exactly a request's: the user's reverse_proxy
// (transport, upstreams, header rules) and every handler before and after
// fhirgate in the site see it as they see a client's, and nothing here
// duplicates or guesses their configuration.
//
// The carrier routes like a client's request to the handler's site: a
// GET of {fhir_base}/metadata whose Host is the first literal host of the
// host matchers on the way to the handler (the site address), else the
// issuer's host; it has no client address, so no remote_ip matcher admits
// it. If routing still takes it elsewhere, the call fails with an error
// saying so: another fhirgate handler refuses it, and anything else gets
// only that bodiless, credential-less public read.

// siteRoute is where a handler sits in the running config: the server
// that holds it and the host to route to it.
type siteRoute struct {
	server *caddyhttp.Server
	host   string
}

// requestLess is a handler's request-less route. It is resolved when the
// config starts (App.Start, resolveRequestLess): only then is the HTTP app,
// which holds the handler, provisioned. Resolving it later, on a
// background goroutine (a queued job, an MLLP message), could meet a config
// whose HTTP app is still being provisioned — and asking Caddy for it then
// loads a second copy of it — so a call before the start fails instead
// (a queued job is retried).
type requestLess struct {
	mu       sync.Mutex
	resolved bool
	route    siteRoute
	err      error
}

// errNotStarted: the handler's config has not started yet.
var errNotStarted = errors.New("the configuration is still starting: runs without a request have no backend route yet")

// dispatch sends r through the server that holds h, to h's site.
func (h *Handler) dispatch(w http.ResponseWriter, r *http.Request) {
	route, err := h.siteRoute()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	r.Host = route.host
	r.URL.Host = route.host
	r.RemoteAddr = "" // no client: remote_ip matchers admit nothing
	route.server.ServeHTTP(w, r)
}

// siteRoute is the server that holds h and the host of its site, as
// resolved when h's config started.
func (h *Handler) siteRoute() (siteRoute, error) {
	rl := h.requestLess
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if !rl.resolved {
		return siteRoute{}, errNotStarted
	}
	return rl.route, rl.err
}

// resolveRequestLess finds the server that holds h and the host of its
// site. Called from App.Start, on the goroutine loading the config, once
// every app of the config is provisioned.
func (h *Handler) resolveRequestLess() {
	route, err := h.findSiteRoute()
	rl := h.requestLess
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.route, rl.err, rl.resolved = route, err, true
}

func (h *Handler) findSiteRoute() (siteRoute, error) {
	app, err := h.ctx.AppIfConfigured("http")
	if err != nil {
		return siteRoute{}, fmt.Errorf("no HTTP app for request-less backend calls: %w", err)
	}
	httpApp, ok := app.(*caddyhttp.App)
	if !ok {
		return siteRoute{}, errors.New("the http app is not Caddy's")
	}
	for _, srv := range httpApp.Servers {
		if hosts, found := findHandler(srv.Routes, h, nil); found {
			route := siteRoute{server: srv, host: firstLiteralHost(hosts)}
			if route.host == "" {
				route.host = issuerHost(h.app.Issuer)
			}
			return route, nil
		}
	}
	return siteRoute{}, errors.New("the fhirgate handler is not in any HTTP server's routes (request-less backend calls need it reachable from a server)")
}

// findHandler walks routes (and the subroutes inside them) to h; it
// returns the host matchers met on the way, outermost first.
func findHandler(routes caddyhttp.RouteList, h *Handler, hosts []string) ([]string, bool) {
	for _, route := range routes {
		inner := append(hosts[:len(hosts):len(hosts)], matcherHosts(route.MatcherSets)...)
		for _, mh := range route.Handlers {
			switch v := mh.(type) {
			case *Handler:
				if v == h {
					return inner, true
				}
			case *caddyhttp.Subroute:
				if found, ok := findHandler(v.Routes, h, inner); ok {
					return found, true
				}
			}
		}
	}
	return nil, false
}

// matcherHosts are the hosts named by host matchers in sets.
func matcherHosts(sets caddyhttp.MatcherSets) []string {
	var out []string
	for _, set := range sets {
		for _, m := range set {
			switch v := m.(type) {
			case *caddyhttp.MatchHost:
				out = append(out, *v...)
			case caddyhttp.MatchHost:
				out = append(out, v...)
			}
		}
	}
	return out
}

// firstLiteralHost is the first host that is neither a wildcard nor a
// placeholder, or "".
func firstLiteralHost(hosts []string) string {
	for _, h := range hosts {
		if h != "" && !strings.ContainsAny(h, "*{") {
			return h
		}
	}
	return ""
}

// sameHost says whether two hosts name the same site: a host matcher
// holds no port (Caddy matches the request's host without it) while the
// issuer's host may carry one, so ports are left out of the comparison.
func sameHost(a, b string) bool {
	return strings.EqualFold(hostOnly(a), hostOnly(b))
}

// hostOnly is host without its port (and without an IPv6 literal's
// brackets).
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.Trim(host, "[]")
}

// issuerHost is the host of the issuer URL, or localhost.
func issuerHost(issuer string) string {
	if u, err := url.Parse(issuer); err == nil && u.Host != "" {
		return u.Host
	}
	return "localhost"
}

// routeName names a handler's place in the configuration for the async
// jobs it accepts: a hash of its JSON config, the same on every replica
// that runs the same config.
func routeName(h *Handler) string {
	b, err := json.Marshal(h)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// requestLessHandler is the handler whose route runs that have none of
// their own and name no site (MLLP, cron) take: the config's only
// fhirgate HTTP handler, or, among several, the one whose site is the
// issuer's host.
func (a *App) requestLessHandler() (*Handler, error) {
	handlers := a.handlers.list()
	switch len(handlers) {
	case 0:
		return nil, errors.New("no fhirgate HTTP handler in this configuration: runs without a request have no backend route")
	case 1:
		return handlers[0], nil
	}
	want := issuerHost(a.Issuer)
	for _, h := range handlers {
		if route, err := h.siteRoute(); err == nil && sameHost(route.host, want) {
			return h, nil
		}
	}
	return nil, fmt.Errorf("%d fhirgate HTTP handlers and none on the issuer's host %s: runs without a request cannot tell which backend to use", len(handlers), want)
}

// backendFor is the request-less backend of the config's requestLessHandler.
func (a *App) backendFor(ctx context.Context, id *oauth.Identity) (*gateway.Backend, error) {
	h, err := a.requestLessHandler()
	if err != nil {
		return nil, err
	}
	return h.gw.BackendFor(ctx, id)
}

// resolveRequestLess resolves every handler's request-less route; see
// requestLess.
func (a *App) resolveRequestLess() {
	for _, h := range a.handlers.list() {
		h.resolveRequestLess()
	}
}

// addHandler records a provisioned HTTP handler of this config.
func (a *App) addHandler(h *Handler) {
	a.handlers.mu.Lock()
	defer a.handlers.mu.Unlock()
	a.handlers.all = append(a.handlers.all, h)
}

// handlerSet is a config's fhirgate HTTP handlers, added as they are
// provisioned.
type handlerSet struct {
	mu  sync.Mutex
	all []*Handler
}

func (s *handlerSet) list() []*Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all
}

// asyncAPI is the bot API that runs a queued async job of route on this
// config: the handler that accepted it, found by its route name; when the
// config has changed and exactly one handler is left, that one.
func (a *App) asyncAPI(route string) (*botapi.API, error) {
	handlers := a.handlers.list()
	for _, h := range handlers {
		if h.route == route {
			return h.bots.API, nil
		}
	}
	if len(handlers) == 1 {
		return handlers[0].bots.API, nil
	}
	return nil, errors.New("no fhirgate handler of the running configuration matches the one that accepted the job")
}

// asyncAPI is the running config's bot API for a queued async job; an
// error while no config has started (the job is retried).
func (h *storeHandle) asyncAPI(route string) (*botapi.API, error) {
	app := h.running.Load()
	if app == nil {
		return nil, errors.New("no configuration is running")
	}
	return app.asyncAPI(route)
}

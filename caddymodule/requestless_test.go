package caddymodule

import (
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestFindHandlerInNestedRoutes: the request-less route finds the handler
// by pointer inside subroutes, with the host matchers met on the way, and
// routes to the first literal one.
func TestFindHandlerInNestedRoutes(t *testing.T) {
	h, other := new(Handler), new(Handler)
	wild := caddyhttp.MatchHost{"*.example.com", "{env.HOST}"}
	site := caddyhttp.MatchHost{"gw.example.com"}
	routes := caddyhttp.RouteList{
		{MatcherSets: caddyhttp.MatcherSets{{&caddyhttp.MatchHost{"elsewhere.test"}}}, Handlers: []caddyhttp.MiddlewareHandler{other}},
		{MatcherSets: caddyhttp.MatcherSets{{wild}, {&site}}, Handlers: []caddyhttp.MiddlewareHandler{&caddyhttp.Subroute{
			Routes: caddyhttp.RouteList{{Handlers: []caddyhttp.MiddlewareHandler{h}}},
		}}},
	}
	hosts, ok := findHandler(routes, h, nil)
	if !ok || firstLiteralHost(hosts) != "gw.example.com" {
		t.Fatalf("findHandler = %v %v, want the site's hosts", hosts, ok)
	}
	if _, ok := findHandler(routes, new(Handler), nil); ok {
		t.Error("a handler in no route was found")
	}
	if got := issuerHost("https://issuer.test:8443/x"); got != "issuer.test:8443" {
		t.Errorf("issuerHost = %q", got)
	}
	if got := issuerHost(""); got != "localhost" {
		t.Errorf("issuerHost of no issuer = %q", got)
	}
}

// TestRequestLessHandlerIssuerWithPort: with several fhirgate handlers, the
// one whose site is the issuer's host serves runs without a request, also
// when the issuer URL names a port (a site's host matcher never does).
func TestRequestLessHandlerIssuerWithPort(t *testing.T) {
	site := func(host string) *Handler {
		// resolved: no Caddy context needed
		return &Handler{requestLess: &requestLess{route: siteRoute{host: host}, resolved: true}}
	}
	other, gw := site("127.0.0.2"), site("127.0.0.1")
	app := &App{Issuer: "http://127.0.0.1:8443"}
	app.handlers = &handlerSet{all: []*Handler{other, gw}}
	got, err := app.requestLessHandler()
	if err != nil || got != gw {
		t.Fatalf("requestLessHandler = %p, %v; want the issuer's site %p", got, err, gw)
	}
	app.Issuer = "http://[::1]:8443"
	gw.requestLess.route.host = "[::1]"
	if got, err := app.requestLessHandler(); err != nil || got != gw {
		t.Fatalf("requestLessHandler (IPv6) = %p, %v; want %p", got, err, gw)
	}
	app.Issuer = "https://elsewhere.test"
	if _, err := app.requestLessHandler(); err == nil {
		t.Error("a handler was chosen for an issuer on no handler's site")
	}
}

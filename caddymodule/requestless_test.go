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

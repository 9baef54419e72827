// Command caddy is Caddy with the standard modules, caddy-l4 (whose
// layer4 app carries fhirgate's MLLP handler, with TLS, IP matchers, the
// PROXY protocol and throttling of its own) and the fhirgate plugin.
//
// Build it with `go build -o caddy ./cmd/caddy`; it is what xcaddy builds
// from xcaddy.json's recipe (`--with github.com/fhirgate/fhirgate
// --with github.com/mholt/caddy-l4`).
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/mholt/caddy-l4"

	_ "github.com/fhirgate/fhirgate"
)

func main() {
	caddycmd.Main()
}

// Command caddy is Caddy with the standard modules and the fhirgate plugin.
//
// Build it with `go build -o caddy ./cmd/caddy`; it is what xcaddy would
// produce with `--with github.com/fhirgate/fhirgate`.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/fhirgate/fhirgate"
)

func main() {
	caddycmd.Main()
}

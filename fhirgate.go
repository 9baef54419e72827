// Package fhirgate is the import path xcaddy builds Caddy with
// (`xcaddy build --with github.com/fhirgate/fhirgate`): importing it
// registers the fhirgate app, HTTP handler, admin API and `caddy fhirgate`
// command, all of which live in package caddymodule.
package fhirgate

import (
	// Registers every fhirgate module and command with Caddy.
	_ "github.com/fhirgate/fhirgate/caddymodule"
)

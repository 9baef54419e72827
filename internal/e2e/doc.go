// Package e2e holds the end-to-end tests: they build the real Caddy from
// cmd/caddy once, run it as a separate process on 127.0.0.1 with loopback
// identity providers and FHIR backends, and drive it over HTTP and through
// the `caddy fhirgate` command. They are skipped under -short.
package e2e

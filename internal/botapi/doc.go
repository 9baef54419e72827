// Package botapi serves the bot operations of the FHIR API that fhirgate
// answers itself instead of proxying:
//
//	GET|POST {fhir_base}/Bot/{id}/$execute[/...]
//	GET|POST {fhir_base}/Bot/$execute[/...]?identifier=system|code
//
// A bot is looked up in the caller's project only, so the same identifier
// in two projects resolves to each caller's own bot and another project's
// bot is a 404, never a 403. The body is parsed by Content-Type (see
// botrunner.ParseInput) once the run holds its slot, by the runner (see
// botrunner.PrepareInput); a body over the limit is 413, an unsupported type
// 415, a body that does not parse 400. The run's result becomes the
// response per DESIGN.md: a bot failure or timeout is 400 (not 5xx: clients
// retry 5xx and a bot must not run three times), a saturated runner is 429
// with Retry-After.
//
// Every run leaves an AuditEvent (unless the bot's auditEventTrigger says
// otherwise), written in the background in batches so the response never
// waits for the disk.
//
// A config reload (Close) never waits for runs; an exit (Shutdown) stops
// those still going after the shutdown grace and says so to their callers.
package botapi

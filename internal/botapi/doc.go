// Package botapi serves the bot operations of the FHIR API that fhirgate
// answers itself instead of proxying:
//
//	GET|POST {fhir_base}/Bot/{id}/$execute[/...]
//	GET|POST {fhir_base}/Bot/$execute[/...]?identifier=system|code
//	{fhir_base}/Bot[/{id}], POST {fhir_base}/Bot/{id}/$deploy
//	GET {fhir_base}/Bot/{id}/_history[/{versionId}]
//	GET {fhir_base}/job/{id}/status
//
// It routes on the gate's reading of the path (gateway.Target), never on
// the path itself. An HTTP $execute and a bot's medplum.executeBot run
// through the same function (runBot): bot lookup, input checks, limits,
// metrics and audit are one code path; only reading the request and
// writing the response are HTTP's.
//
// A bot runs as itself (Bot/{id}, with its membership's scope: by default
// the project's full access) unless its runAsUser says to run as its
// caller: its medplum calls go through the request's route with that
// identity, or, for a run without a request (RunMessage, a queued async
// run), through Options.Backends. Async runs
// are queue jobs (AsyncKind) that any replica sharing the queue may run.
//
// A bot is looked up in the caller's project only, so the same identifier
// in two projects resolves to each caller's own bot and another project's
// bot is a 404, never a 403. The body's media type is checked first (see
// botrunner.PrepareInput) and the body parsed by the runner once the run
// holds its slot; a body over the limit is 413, an unsupported type 415, a
// body that does not parse 400. The run's result becomes the
// response per DESIGN.md: a bot failure or timeout is 400 (not 5xx: clients
// retry 5xx and a bot must not run three times), a saturated runner is 429
// with Retry-After.
//
// Every run leaves an AuditEvent (unless the bot's auditEventTrigger says
// otherwise), written in the background in batches so the response never
// waits for the disk; the bot's auditEventDestination also sends it to the
// backend or the log (auditdest.go).
//
// Scheduled bots (cronString, cronTiming) run through the job queue: a
// periodic scan enqueues a job per bot and tick, and each runs the bot as
// itself through RunMessage (cron.go).
//
// A config reload (Close) never waits for runs; an exit (Shutdown) stops
// those still going after the shutdown grace and says so to their callers.
package botapi

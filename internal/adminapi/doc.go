// Package adminapi serves fhirgate's operator API: create, read, replace,
// delete and list of the records in the store, bot deployment, key rotation
// and whole-store backup and restore.
//
// It is a plain http.Handler so it can be tested without Caddy; the Caddy
// module mounts it on Caddy's admin listener under /fhirgate/. Every error is
// a FHIR OperationOutcome with a status that says what went wrong: 400 bad
// input, 404 unknown type or id, 405 wrong method, 409 conflict (a unique
// index, a version mismatch, a record still in use), 413 body too large, 415
// a body that is not JSON.
//
// Caddy's admin server logs every request URI, so nothing secret ever travels
// in a path or query string here: secrets and source code go in bodies.
//
// # Routes
//
//	POST   /fhirgate/{Type}              create (a new id is assigned)
//	GET    /fhirgate/{Type}?name=&email=&identifier=&project=&user=&bot=
//	                                     list (a FHIR searchset Bundle)
//	GET    /fhirgate/{Type}/{id}         read
//	PUT    /fhirgate/{Type}/{id}         create or replace (If-Match honoured)
//	DELETE /fhirgate/{Type}/{id}         delete
//	POST   /fhirgate/Bot/{id}/$deploy    {"code": "...", "filename": "index.ts"}
//	POST   /fhirgate/keys/rotate         new signing key; old tokens stay valid
//	GET    /fhirgate/backup              the whole store as a backup stream
//	POST   /fhirgate/restore             load a backup stream
package adminapi

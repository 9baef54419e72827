// Package store persists fhirgate's Medplum-shaped administrative resources
// (projects, client applications, users, memberships, bots, binaries, logins,
// audit events, signing keys and async jobs).
//
// It has two layers.
//
// # Key-value layer
//
// [KV] and [Txn] are a deliberately narrow transactional interface: point
// get/set/delete with optional TTL and ordered prefix scans. Package badgerkv is the
// embedded implementation; package pgkv implements it on PostgreSQL so
// several gateways can share state, and package kvtest is the conformance
// suite both pass. Nothing above [KV] may assume Badger, or that this
// process is the only writer.
//
// # Resource layer
//
// [Store] keeps typed resources on top of any [KV]. Every write validates the
// resource, assigns meta.versionId and meta.lastUpdated, and maintains the
// secondary indexes (unique email, bot identifiers, memberships by project and
// user, audit events by bot and time, ...) inside the same transaction as the
// record, so an index never disagrees with the record it points at. See
// keys.go for the key layout.
//
// Every resource struct embeds [Base] (under the unexported field name
// "base", so that the Base method of the [Resource] interface is promoted):
// use p.ID, p.Meta.Project or r.Base().Meta.VersionID.
//
// # Usage
//
//	kv, err := badgerkv.Open(badgerkv.Options{Dir: dir}) // or pgkv.Open
//	if err != nil { ... }
//	defer kv.Close()
//	s := store.New(kv, store.Options{})
//	p := &store.Project{Name: "demo"}
//	if err := s.Create(ctx, p, store.PutOptions{}); err != nil { ... }
//	bot, err := store.Get[store.Bot](ctx, s, botID)
package store

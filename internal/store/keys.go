package store

import "strings"

// Key layout. Every key is ASCII and '/'-separated:
//
//	r/<Type>/<id>                        -> resource JSON
//	u/<index>/<v1>[/<v2>...]             -> id of the one resource holding that value (unique index)
//	i/<index>/<v1>[/<v2>...]/<id>        -> "" (non-unique index; the id is the key's last component)
//	g/<Type>/<id>                        -> "" (dependency guard, see below)
//	q/<project>/<day>/<shard>            -> bytes of the project's bot records expiring that day (usage.go)
//	n/<namespace>/<value>                -> "" (a single-use value, expiring; once.go)
//	h/<Type>/<id>/<seq>                  -> a prior version's JSON (history.go; seq is time-ordered)
//
// Index values are escaped with escapeComponent ('%', '/' and '|' become %25,
// %2F and %7C), so a value containing a separator can never collide with
// another value or spill into the next component, and a prefix scan on
// "i/<index>/<v1>/" matches exactly v1. Ids need no escaping: they are
// validated against [A-Za-z0-9\-.]{1,64}. Escaping keeps byte order for values
// without those characters, which the time-ordered audit index relies on.
//
// Indexes (values normalized where noted):
//
//	u/User.email/<email, NormalizeEmail: ASCII letters lower-cased>
//	u/ProjectMembership.externalId/<project>/<externalId>
//	u/Bot.identifier/<project>/<system>/<value>
//	i/<Type>.project/<project>/<id>                  every type with meta.project
//	i/ProjectMembership.project-user/<project>/<user>/<id>   <user>: a User id, or the member's reference (Principal)
//	i/ProjectMembership.user/<user>/<id>
//	i/Bot.identifier-value/<project>/<value>/<id>    identifier lookups without a system
//	i/Bot.cron/<id>                                  bots with a schedule (cronString or cronTiming)
//	i/Login.user/<user>/<id>
//	i/AuditEvent.recorded/<recorded>/<id>            recorded is fixed-width UTC, so keys sort by time
//	i/AuditEvent.bot-recorded/<bot>/<recorded>/<id>
//
// Index keys are written and deleted in the same transaction as their
// record, with the record's TTL.
//
// Dependency guards close a phantom race: deleting a Project (or User) checks
// by index scan that nothing references it, but an optimistic transaction
// only conflicts on keys it actually read, and a membership created
// concurrently is a key the scan never saw. So every write that requires a
// referenced resource to exist also writes that resource's guard key, and a
// delete reads the guard key of its target: whichever commits second
// conflicts and is retried against the other's result. Referencing writers
// only write the guard (never read it), so they do not conflict with each
// other.
const (
	recordPrefix = "r/"
	uniquePrefix = "u/"
	indexPrefix  = "i/"
	guardPrefix  = "g/"
)

const (
	idxUserEmail             = "User.email"
	idxMembershipExternalID  = "ProjectMembership.externalId"
	idxMembershipProjectUser = "ProjectMembership.project-user"
	idxMembershipUser        = "ProjectMembership.user"
	idxBotIdentifier         = "Bot.identifier"
	idxBotIdentifierValue    = "Bot.identifier-value"
	idxBotCron               = "Bot.cron"
	idxLoginUser             = "Login.user"
	idxAuditRecorded         = "AuditEvent.recorded"
	idxAuditBotRecorded      = "AuditEvent.bot-recorded"
)

// projectIndex names the per-type project index.
func projectIndex(resourceType string) string { return resourceType + ".project" }

func recordKey(resourceType, id string) []byte {
	return []byte(recordPrefix + resourceType + "/" + id)
}

func guardKey(resourceType, id string) []byte {
	return []byte(guardPrefix + resourceType + "/" + id)
}

func recordTypePrefix(resourceType string) []byte {
	return []byte(recordPrefix + resourceType + "/")
}

func uniqueKey(index string, values ...string) []byte {
	b := append([]byte(uniquePrefix), index...)
	for _, v := range values {
		b = appendEscaped(append(b, '/'), v)
	}
	return b
}

// indexPrefixKey returns "i/<index>/<v1>/.../" for scanning.
func indexPrefixKey(index string, values ...string) []byte {
	return appendIndexPrefix(make([]byte, 0, indexKeyLen(index, "", values)), index, values)
}

// indexKey returns "i/<index>/<v1>/.../<id>", built in one allocation:
// every stored record writes one or more (an AuditEvent two per bot run).
func indexKey(index, id string, values ...string) []byte {
	return append(appendIndexPrefix(make([]byte, 0, indexKeyLen(index, id, values)), index, values), id...)
}

// indexKeyLen is the length of an index key whose values need no escaping;
// escaped ones make append grow the buffer.
func indexKeyLen(index, id string, values []string) int {
	n := len(indexPrefix) + len(index) + 1 + len(id)
	for _, v := range values {
		n += len(v) + 1
	}
	return n
}

func appendIndexPrefix(b []byte, index string, values []string) []byte {
	b = append(b, indexPrefix...)
	b = append(b, index...)
	b = append(b, '/')
	for _, v := range values {
		b = appendEscaped(b, v)
		b = append(b, '/')
	}
	return b
}

// idFromIndexKey returns the id component of a non-unique index key.
func idFromIndexKey(key []byte) string {
	s := string(key)
	return s[strings.LastIndexByte(s, '/')+1:]
}

func appendEscaped(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '%':
			b = append(b, "%25"...)
		case '/':
			b = append(b, "%2F"...)
		case '|':
			b = append(b, "%7C"...)
		default:
			b = append(b, c)
		}
	}
	return b
}

package botrunner

import (
	"hash/maphash"

	"github.com/dop251/goja"
)

// A JSON string becomes a JavaScript string in three allocations: the Go string, its boxing
// into ToValue's argument, and goja's own value. FHIR inputs repeat short strings within a
// document and from one run to the next (codes, systems, uses, statuses, units), so a warm
// instance keeps the values of the short strings it decoded last, one per slot of a table
// indexed by their hash, and hands out the same value again: a JavaScript string is a
// primitive, so a bot cannot tell one copy from another. Only instances that serve run after run
// keep a table (a vmcontext runtime serves one run). A slot is replaced by the next string
// that hashes to it, so the table follows what the inputs repeat now, and its size is bounded:
// jsonStringSlots strings of at most maxJSONStringLen bytes, at most some 50 KB per instance
// (a worker keeps up to 256 idle instances).
const (
	jsonStringSlots  = 256 // a power of two
	maxJSONStringLen = 32
)

type jsonStringCache struct {
	seed  maphash.Seed
	slots [jsonStringSlots]struct {
		s string
		v goja.Value
	}
}

// stringValue is the JavaScript string whose UTF-8 is raw (a string literal without escapes).
func (d *jsonDecoder) stringValue(raw []byte) goja.Value {
	if len(raw) > maxJSONStringLen {
		return d.rt.ToValue(string(raw))
	}
	c := d.x.jsonStrings
	if c == nil {
		if !d.x.pooled {
			// Not a warm instance the pool handed out (a vmcontext runtime, or an instance's first
			// run): the runtime may serve no other run, and the table is as big as the values.
			return d.rt.ToValue(string(raw))
		}
		c = &jsonStringCache{seed: maphash.MakeSeed()}
		d.x.jsonStrings = c
	}
	slot := &c.slots[maphash.Bytes(c.seed, raw)&(jsonStringSlots-1)]
	if slot.v != nil && slot.s == string(raw) {
		return slot.v
	}
	s := string(raw)
	slot.s, slot.v = s, d.rt.ToValue(s)
	return slot.v
}

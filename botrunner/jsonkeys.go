package botrunner

// A warm instance decodes inputs of the same shape run after run ("resourceType", "id",
// "coding", …): keeping the object keys it has seen lets later inputs reuse those strings
// instead of allocating each key again. The cache is the execution's (one run at a time, on
// the run's goroutine), bounded in entries and key length, so a bot fed random keys costs at
// most maxJSONKeys short strings (some 25 KB; a worker keeps up to 256 idle instances).
// FHIR's element names fit in maxJSONKeyLen.
const (
	maxJSONKeys   = 256
	maxJSONKeyLen = 32
)

// key reads the object key at d.i, from the execution's key cache when it is there. An escaped
// key is decoded by str and not cached.
func (d *jsonDecoder) key() string {
	start := d.i
	for j := start + 1; j < len(d.b); j++ {
		switch d.b[j] {
		case '\\':
			return d.str()
		case '"':
			raw := d.b[start+1 : j]
			d.i = j + 1
			if k, ok := d.x.jsonKeys[string(raw)]; ok { // no allocation for the lookup
				return k
			}
			k := string(raw)
			if len(k) <= maxJSONKeyLen && len(d.x.jsonKeys) < maxJSONKeys {
				if d.x.jsonKeys == nil {
					d.x.jsonKeys = make(map[string]string)
				}
				d.x.jsonKeys[k] = k
			}
			return k
		}
	}
	return d.str()
}

package botrunner

import (
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// TestJSONStringCacheReusesShortStringsOnly: in a warm instance, a short string decoded again is
// the cached value (so the cache is in use), and no string longer than maxJSONStringLen is kept,
// however many distinct strings it decodes; a runtime for one run keeps no table. That the values are right, cached or not, slot
// collisions included, is TestJSONValueMatchesReference's.
func TestJSONStringCacheReusesShortStringsOnly(t *testing.T) {
	x := &execution{rt: goja.New(), pooled: true}
	long := strings.Repeat("x", maxJSONStringLen+1)
	doc := []byte(`{"use":"official","text":"` + long + `"}`)
	first := x.jsonValue(doc).(*goja.Object)
	second := x.jsonValue(doc).(*goja.Object)
	if first.Get("use") != second.Get("use") {
		t.Error("a short string decoded twice was built twice")
	}
	if second.Get("text").String() != long {
		t.Errorf("long string decoded as %q", second.Get("text"))
	}
	var b strings.Builder
	b.WriteString("[")
	for i := range 4 * jsonStringSlots {
		b.WriteString(`"` + strings.Repeat("v", i%(2*maxJSONStringLen)) + `",`)
	}
	b.WriteString(`""]`)
	x.jsonValue([]byte(b.String()))
	cached := 0
	for _, slot := range x.jsonStrings.slots {
		if len(slot.s) > maxJSONStringLen {
			t.Fatalf("a string of %d bytes is cached", len(slot.s))
		}
		if slot.v != nil {
			cached++
			if slot.v.String() != slot.s {
				t.Fatalf("slot holds %q for %q", slot.v, slot.s)
			}
		}
	}
	if cached == 0 {
		t.Fatal("nothing cached")
	}
	fresh := &execution{rt: goja.New()}
	fresh.jsonValue(doc)
	if fresh.jsonStrings != nil {
		t.Error("a runtime that is not a pooled instance keeps a string table")
	}
}

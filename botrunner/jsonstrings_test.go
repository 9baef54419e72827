package botrunner

import (
	"bytes"
	"encoding/json"
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

// TestWarmInstanceDecodesEachInput runs an echo bot in one warm instance, in process and in a
// worker, on inputs that share many short strings and on one that shares none, in turn: each
// run's event.input is its own input, whatever the string table kept from the runs before.
func TestWarmInstanceDecodesEachInput(t *testing.T) {
	patient := readBenchInput(t, "patient.json")
	var doc any
	if err := json.Unmarshal(patient, &doc); err != nil {
		t.Fatal(err)
	}
	unique, err := json.Marshal(uniqueStrings(doc, "", 7))
	if err != nil {
		t.Fatal(err)
	}
	inputs := [][]byte{patient, readBenchInput(t, "scenario3.json"), unique, patient, unique}
	const echo = `exports.handler = async (medplum, event) => event.input;`
	for name, ex := range executors(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			for i, in := range inputs {
				res := counterRun(t, ex, echo, counterReq{runtime: RuntimeAWSLambda, project: "p", bot: "echo", key: "echo", input: string(in)})
				var want bytes.Buffer
				if err := json.Compact(&want, in); err != nil {
					t.Fatal(err)
				}
				if res.Outcome != OutcomeSuccess || !bytes.Equal(res.Body, want.Bytes()) {
					t.Fatalf("run %d: %s %s, want %s", i, res.Outcome, res.Body, want.Bytes())
				}
			}
			if r, ok := ex.(*Runner); ok && !keptStringTable(r) {
				t.Error("the warm instance kept no string table: the runs did not go through it")
			}
		})
	}
}

// keptStringTable reports whether an idle instance of r has a string table.
func keptStringTable(r *Runner) bool {
	r.instances.mu.Lock()
	defer r.instances.mu.Unlock()
	for _, set := range r.instances.sets {
		for _, x := range set.idle {
			if x.jsonStrings != nil {
				return true
			}
		}
	}
	return false
}

package botrunner

import (
	"encoding/json"
	"reflect"
	"testing"
)

// prototypeTrapBot puts a setter and a read-only property on Object.prototype at its top level,
// as module state that outlives the run in a warm awslambda instance. The next run's event
// must still carry the input's fields as its own properties, as JSON.parse gives them in
// Medplum, not hand them to the setter or drop them on the read-only property.
const prototypeTrapBot = `
Object.defineProperty(Object.prototype, 'id', {set(v) { globalThis.hit = v; }, get() { return 'proto'; }, configurable: true});
Object.defineProperty(Object.prototype, 'status', {value: 'frozen', writable: false, configurable: true});
Object.defineProperty(Object.prototype, 'input', {set(v) { globalThis.hit = 'input'; }, configurable: true});
exports.handler = async (medplum, event) => ({
	own: Object.keys(event.input), id: event.input.id, status: event.input.status,
	hasInput: Object.prototype.hasOwnProperty.call(event, 'input'), hit: globalThis.hit || null,
});`

func TestEventFieldsAreOwnPropertiesWhateverThePrototypeHas(t *testing.T) {
	want := map[string]any{"own": []any{"id", "status"}, "id": "1", "status": "final", "hasInput": true, "hit": nil}
	for name, ex := range executors(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			for _, runtime := range []string{RuntimeAWSLambda, RuntimeAWSLambda, RuntimeVMContext} {
				res := counterRun(t, ex, prototypeTrapBot, counterReq{runtime: runtime, project: "p", bot: "trap", key: "trap" + runtime, input: `{"id":"1","status":"final"}`})
				var got map[string]any
				if err := json.Unmarshal(res.Body, &got); err != nil {
					t.Fatalf("%s: %s %s: %v", runtime, res.Outcome, res.Body, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: event seen as %s, want %v", runtime, res.Body, want)
				}
			}
		})
	}
}

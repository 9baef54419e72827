package botapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/store"
)

// TestGateAndBotAPIAgree sends requests whose paths play with case,
// percent-encodings, dot segments, double and trailing slashes through a
// real gateway in front of the API, and checks what happened: the bot ran,
// the API answered, or the backend got the request. The API routes on the
// gate's reading of the path, so a request the gate judges to be a bot
// operation is one, and one it hands to the backend never runs a bot.
func TestGateAndBotAPIAgree(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t, Options{})
	bot := f.deployBot(t, &store.Bot{Name: "ran"}, `exports.handler = async () => "ran";`)
	id := bot.ID
	const (
		ran     = "ran"     // the bot ran
		search  = "search"  // the API answered a Bot search
		backend = "backend" // the request went on to the backend
		apiOnly = "api"     // the API answered with an OperationOutcome naming want
	)
	tests := []struct {
		name, path string
		effect     string
		text       string // for apiOnly: in the outcome's text
	}{
		{"plain", "/fhir/R4/Bot/" + id + "/$execute", ran, ""},
		{"base in another case", "/FHIR/r4/Bot/" + id + "/$execute", ran, ""},
		{"encoded dollar", "/fhir/R4/Bot/" + id + "/%24execute", ran, ""},
		{"encoded letter in the type", "/fhir/R4/%42ot/" + id + "/$execute", ran, ""},
		{"dot-dot back into the base", "/fhir/R4/../R4/Bot/" + id + "/$execute", ran, ""},
		{"dot segment", "/fhir/R4/./Bot/" + id + "/$execute", ran, ""},
		{"double slashes", "//fhir//R4//Bot//" + id + "//$execute", ran, ""},
		{"trailing slash", "/fhir/R4/Bot/" + id + "/$execute/", ran, ""},
		{"extra path after $execute", "/fhir/R4/Bot/" + id + "/$execute/x/y", ran, ""},
		{"$execute in the fourth segment", "/fhir/R4/Bot/" + id + "/x/$execute", apiOnly, "fhirgate supports"},
		{"search with a trailing slash", "/fhir/R4/Bot/", search, ""},
		{"encoded slash stays in the id", "/fhir/R4/Bot/a%2Fb", apiOnly, "Bot/a/b not found"},
		{"doubly encoded dollar is no operation", "/fhir/R4/Bot/" + id + "/%2524execute", apiOnly, "fhirgate supports"},
		{"type in another case is not a Bot", "/fhir/R4/bot/" + id + "/$execute", backend, ""},
		{"encoded slash in the base", "/fhir/R4%2FBot/" + id + "/$execute", backend, ""},
		{"servlet parameter in the base", "/fhir;a=1/R4/Bot/" + id + "/$execute", backend, ""},
		{"servlet parameter on the id", "/fhir/R4/Bot/" + id + ";x/$execute", apiOnly, "Bot/" + id + ";x not found"},
		{"encoded slashes join the segments", "/fhir/R4/Bot%2F" + id + "%2F%24execute", backend, ""},
		{"dot-dot out of the Bot type", "/fhir/R4/Bot/../Patient/p1", backend, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.backendRequests())
			r := f.serve(t, f.adminToken, http.MethodGet, tt.path, "")
			reached := len(f.backendRequests()) > before
			if reached != (tt.effect == backend) {
				t.Fatalf("backend reached: %v, want effect %s (status %d %s)", reached, tt.effect, r.status, r.body)
			}
			switch tt.effect {
			case ran:
				if r.status != http.StatusOK || r.body != "ran" {
					t.Fatalf("the bot did not run: %d %s", r.status, r.body)
				}
			case search:
				if r.status != http.StatusOK || r.json(t)["resourceType"] != "Bundle" {
					t.Fatalf("no Bot search: %d %s", r.status, r.body)
				}
			case apiOnly:
				if text := outcomeText(t, r); !strings.Contains(text, tt.text) {
					t.Fatalf("outcome %q, want %q", text, tt.text)
				}
			}
		})
	}
}

// targetOf is the gate's reading of r's path under /fhir/R4, for tests that
// call the API's handler without a gateway.
func targetOf(r *http.Request) gateway.Target {
	return gateway.ParseTarget("/fhir/R4", r.URL)
}

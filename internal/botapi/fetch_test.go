package botapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/egress"
	"github.com/fhirgate/fhirgate/internal/store"
)

// TestBotFetchGoesThroughTheProjectsEgress runs a bot that fetches an
// allowed loopback host and a refused one: the bot sees the answer and the
// refusal, the egress is asked for the bot's own project, and the run's
// AuditEvent counts both calls (host, outcome, status, bytes) and carries
// neither headers nor bodies.
func TestBotFetchGoesThroughTheProjectsEgress(t *testing.T) {
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"secretAnswer":42}`)
	}))
	defer allowed.Close()
	refused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer refused.Close()
	host := strings.TrimPrefix(allowed.URL, "http://")

	var asked []string
	e := egress.New(egress.Options{Lookup: func(project string) (*egress.Policy, error) {
		asked = append(asked, project)
		return &egress.Policy{AllowHTTP: []string{host}}, nil
	}})
	f := newAPIFixture(t, Options{Egress: e})
	bot := f.deployBot(t, &store.Bot{Name: "fetcher"}, `exports.handler = async () => {
  const r = await fetch('`+allowed.URL+`/x', { method: 'POST', headers: { 'X-Token': 'hush' }, body: 'req-body' });
  let refusal;
  try { await fetch('`+refused.URL+`/'); } catch (e) { refusal = e.message; }
  return { got: await r.json(), refusal };
};`)
	r := f.serve(t, f.adminToken, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$execute", `{}`)
	if r.status != http.StatusOK || !strings.Contains(r.body, `"got":{"secretAnswer":42}`) || !strings.Contains(r.body, "not on the project's egress allow-list") {
		t.Fatalf("run: %d %s", r.status, r.body)
	}
	if len(asked) == 0 || asked[0] != f.project.ID {
		t.Errorf("egress asked for projects %v, want %s", asked, f.project.ID)
	}

	f.api.Shutdown()
	evs := f.auditEventsOf(t, bot.ID)
	if len(evs) != 1 {
		t.Fatalf("%d AuditEvents", len(evs))
	}
	raw, _ := json.Marshal(evs[0])
	var fetchExt *store.Extension
	for i := range evs[0].Extension {
		if evs[0].Extension[i].URL == fetchExtensionURL {
			fetchExt = &evs[0].Extension[i]
		}
	}
	if fetchExt == nil {
		t.Fatalf("no fetch extension in %s", raw)
	}
	got, _ := json.Marshal(fetchExt)
	want := `{"url":"` + fetchExtensionURL + `","extension":[{"url":"count","valueInteger":2},` +
		`{"url":"call","extension":[{"url":"host","valueCode":"` + host + `"},{"url":"outcome","valueCode":"ok"},{"url":"bytesSent","valueInteger":8},{"url":"bytesReceived","valueInteger":19},{"url":"status","valueInteger":200}]},` +
		`{"url":"call","extension":[{"url":"host","valueCode":"` + strings.TrimPrefix(refused.URL, "http://") + `"},{"url":"outcome","valueCode":"refused"},{"url":"bytesSent","valueInteger":0},{"url":"bytesReceived","valueInteger":0}]}]}`
	if string(got) != want {
		t.Errorf("fetch extension\n got %s\nwant %s", got, want)
	}
	for _, secret := range []string{"hush", "req-body", "secretAnswer", "/x"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the AuditEvent carries %q: %s", secret, raw)
		}
	}
}

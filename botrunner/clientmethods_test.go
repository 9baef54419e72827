package botrunner

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// methodsBackend is a loopback FHIR server for the client methods beyond CRUD: it stores Binary
// bytes as they are posted, pages Patient searches two ways (Medplum's next links and HAPI's
// _getpages at the base), and logs every request.
type methodsBackend struct {
	mu       sync.Mutex
	requests []string
	binaries map[string][]byte
	types    map[string]string
	srv      *httptest.Server
}

func newMethodsBackend(t *testing.T) (*methodsBackend, MedplumClient) {
	t.Helper()
	b := &methodsBackend{binaries: map[string][]byte{}, types: map[string]string{}}
	b.srv = httptest.NewServer(b)
	t.Cleanup(b.srv.Close)
	return b, httpClient{base: b.srv.URL + "/fhir"}
}

func (b *methodsBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	defer b.mu.Unlock()
	line := r.Method + " " + r.URL.RequestURI()
	if ct := r.Header.Get("Content-Type"); ct != "" {
		line += " " + ct
	}
	if p := r.Header.Get("Prefer"); p != "" {
		line += " Prefer:" + p
	}
	b.requests = append(b.requests, line)
	reply := func(status int, v string) {
		w.Header().Set("Content-Type", "application/fhir+json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, v)
	}
	base := b.srv.URL + "/fhir"
	q := r.URL.Query()
	switch p := strings.TrimPrefix(r.URL.Path, "/fhir"); {
	case p == "/Binary" && r.Method == http.MethodPost:
		id := fmt.Sprintf("bin-%d", len(b.binaries)+1)
		b.binaries[id], b.types[id] = body, r.Header.Get("Content-Type")
		reply(201, fmt.Sprintf(`{"resourceType":"Binary","id":%q,"contentType":%q}`, id, r.Header.Get("Content-Type")))
	case strings.HasPrefix(p, "/Binary/") && r.Method == http.MethodGet:
		id := strings.TrimPrefix(p, "/Binary/")
		reply(200, fmt.Sprintf(`{"resourceType":"Binary","id":%q,"contentType":%q,"data":%q}`, id, b.types[id], base64.StdEncoding.EncodeToString(b.binaries[id])))
	case p == "/Media" && r.Method == http.MethodPost:
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		m["id"] = "media-1"
		out, _ := json.Marshal(m)
		reply(201, string(out))
	case p == "/Media/media-1" && r.Method == http.MethodPut, p == "/Communication" && r.Method == http.MethodPost:
		reply(200, string(body))
	case p == "/auth/run-token":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"accessToken":"run-token-1"}`)
	case p == "/Practitioner/pr-1":
		reply(200, `{"resourceType":"Practitioner","id":"pr-1","name":[{"given":["Dee"],"family":"Doc"}]}`)
	case p == "/Patient" && q.Get("page") == "" && q.Get("name") != "":
		reply(200, fmt.Sprintf(`{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{"resourceType":"Patient","id":"p1"}}],"link":[{"relation":"next","url":"%s/Patient?name=x&page=2"}]}`, base))
	case p == "/Patient" && q.Get("page") == "2":
		reply(200, fmt.Sprintf(`{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{"resourceType":"Patient","id":"p2"}}],"link":[{"relation":"next","url":"%s?_getpages=abc&_getpagesoffset=2"}]}`, base))
	case p == "/" && q.Get("_getpages") == "abc":
		reply(200, `{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{"resourceType":"Patient","id":"p3"}}]}`)
	case p == "/" && q.Get("_type") != "":
		reply(200, `{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{"resourceType":"ValueSet","id":"vs-2"}}]}`)
	case p == "/ValueSet" && q.Get("url") != "":
		reply(200, `{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{"resourceType":"ValueSet","id":"vs-1"}}]}`)
	default:
		reply(200, fmt.Sprintf(`{"resourceType":"Parameters","parameter":[{"name":"echo","valueString":%q}]}`, line+" "+string(body)))
	}
}

func (b *methodsBackend) log() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...)
}

func TestMedplumClientMoreMethods(t *testing.T) {
	tests := []struct {
		name     string
		expr     string
		want     string   // JSON of the awaited value, or "reject: <message>"
		requests []string // what the backend saw
	}{
		{"readPatientEverything", `medplum.readPatientEverything('p1').then((r: any) => r.parameter[0].valueString)`, `"GET /fhir/Patient/p1/$everything "`,
			[]string{"GET /fhir/Patient/p1/$everything"}},
		{"readPatientSummary", `medplum.readPatientSummary('p1').then((r: any) => r.resourceType)`, `"Parameters"`, []string{"GET /fhir/Patient/p1/$summary"}},
		{"valueSetExpand", `medplum.valueSetExpand({ url: 'http://vs', filter: 'ab' }).then((r: any) => r.resourceType)`, `"Parameters"`,
			[]string{"GET /fhir/ValueSet/$expand?filter=ab&url=http%3A%2F%2Fvs"}},
		{"graphql", `medplum.graphql('{ Patient(id: "1") { id } }').then((r: any) => r.resourceType)`, `"Parameters"`,
			[]string{"POST /fhir/$graphql application/json"}},
		{"readCanonical", `medplum.readCanonical('ValueSet', 'http://vs|1').then((r: any) => r.id)`, `"vs-1"`,
			[]string{"GET /fhir/ValueSet?_count=1&url=http%3A%2F%2Fvs%7C1"}},
		{"readCanonical of several types", `medplum.readCanonical(['ValueSet', 'CodeSystem'], 'http://vs').then((r: any) => r.id)`, `"vs-2"`,
			[]string{"GET /fhir/?_count=1&_type=ValueSet%2CCodeSystem&url=http%3A%2F%2Fvs"}}, // the base: this test's client adds the slash
		{"searchResourcePages", `(async () => { const ids = []; for await (const page of medplum.searchResourcePages('Patient', { name: 'x' })) { ids.push(page.map((p: any) => p.id).join('+') + ':' + page.bundle.type) } return ids })()`,
			`["p1:searchset","p2:searchset","p3:searchset"]`,
			[]string{"GET /fhir/Patient?_count=1000&name=x", "GET /fhir/Patient?name=x&page=2", "GET /fhir/?_getpages=abc&_getpagesoffset=2"}},
		{"createBinary of text", `medplum.createBinary('hello', 'a.txt', 'text/plain').then((b: any) => [b.id, b.contentType])`, `["bin-1","text/plain"]`,
			[]string{"POST /fhir/Binary?_filename=a.txt text/plain"}},
		{"createAttachment of bytes, then download", `(async () => {
  const a = await medplum.createAttachment({ data: new Uint8Array([0, 1, 255]), contentType: 'application/octet-stream', filename: 'b.bin' });
  const blob = await medplum.download(a.url);
  return [a, blob.size, blob.type, Array.from(new Uint8Array(await blob.arrayBuffer()))];
})()`, `[{"contentType":"application/octet-stream","url":"Binary/bin-1","title":"b.bin"},3,"application/octet-stream",[0,1,255]]`,
			[]string{"POST /fhir/Binary?_filename=b.bin application/octet-stream", "GET /fhir/Binary/bin-1"}},
		{"uploadMedia", `medplum.uploadMedia('text', 'text/plain', 'n.txt', { subject: { reference: 'Patient/p1' } }).then((m: any) => [m.status, m.content, m.subject])`,
			`["completed",{"contentType":"text/plain","url":"Binary/bin-1","title":"n.txt"},{"reference":"Patient/p1"}]`,
			[]string{"POST /fhir/Media application/fhir+json", "POST /fhir/Binary?_filename=n.txt text/plain", "PUT /fhir/Media/media-1 application/fhir+json"}},
		{"download of something else", `medplum.download('https://elsewhere.example/x')`, "reject: medplum.download reads only Binary resources of the FHIR backend, not 'https://elsewhere.example/x'", nil},
		{"getProfile and createComment", `(async () => {
  const c = await medplum.createComment({ resourceType: 'Patient', id: 'p1' }, 'looks fine');
  return [medplum.getProfile().id, c.sender, c.subject, c.basedOn, c.payload, typeof c.sent, medplum.isLoading()];
})()`, `["pr-1",{"reference":"Practitioner/pr-1","display":"Dee Doc"},{"reference":"Patient/p1"},[{"reference":"Patient/p1"}],[{"contentString":"looks fine"}],"string",false]`,
			[]string{"GET /fhir/Practitioner/pr-1", "POST /fhir/Communication application/fhir+json"}},
		{"startAsyncRequest", `medplum.startAsyncRequest('$export').then((r: any) => r.resourceType)`, `"Parameters"`, []string{"POST /fhir/$export Prefer:respond-async"}},
		{"sendEmail goes to the gateway's email path", `medplum.sendEmail({ to: 'a@example.com', subject: 's', text: 't' }).then((r: any) => r.parameter[0].valueString)`,
			`"POST /fhir/email/v1/send application/json {\"to\":\"a@example.com\",\"subject\":\"s\",\"text\":\"t\"}"`, []string{"POST /fhir/email/v1/send application/json"}},
		{"createPdf is refused", `Promise.resolve().then(() => medplum['create' + 'Pdf']({}))`, // a direct call is refused at deploy
			"reject: medplum.createPdf is not available in the bot sandbox: it renders with Medplum's server (pdfmake and its fonts), which fhirgate does not have", nil},
		{"getAccessToken asks the gateway once", `Promise.resolve().then(() => [medplum.getAccessToken(), medplum.getAccessToken()])`,
			`["run-token-1","run-token-1"]`, []string{"POST /fhir/auth/run-token"}},
		{"fhirUrl without a base URL", `Promise.resolve().then(() => medplum.fhirUrl('Patient'))`,
			"reject: medplum.fhirUrl is not available in this run: it was not started by a request to the gateway's FHIR API, so it has no base URL", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			backend, client := newMethodsBackend(t)
			src := `export async function handler(medplum: any) {
  try { return 'ok: ' + JSON.stringify(await (` + tc.expr + `)) } catch (e: any) { return 'reject: ' + e.message }
}`
			p := mustCompile(t, "index.ts", src)
			ev := jsonEvent(t, `{}`)
			ev.Requester = &Reference{Reference: "Practitioner/pr-1"}
			res, err := New(Options{}).Run(ctxT(t), Request{Code: p.JS, Timeout: 5 * time.Second, Event: ev, Medplum: client})
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if !strings.HasPrefix(want, "reject: ") {
				want = "ok: " + want
			}
			if res.Outcome != OutcomeSuccess || string(res.Body) != want {
				t.Errorf("got %v %s %s\nwant %s", res.Outcome, res.Body, res.Message, want)
			}
			if got := backend.log(); strings.Join(got, "\n") != strings.Join(tc.requests, "\n") {
				t.Errorf("backend saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.requests, "\n"))
			}
		})
	}
}

// fhirUrl, fhirSearchUrl and getBaseUrl build on the run's FHIR base URL, in process and in a
// bot worker alike.
func TestMedplumClientURLs(t *testing.T) {
	src := `export async function handler(medplum: any) {
  return [medplum.fhirUrl('Patient', '1', '$everything').toString(), medplum.fhirSearchUrl('Patient', { name: 'a b', _count: 2 }).href,
    medplum.fhirSearchUrl('Patient').href, medplum.getBaseUrl()];
}`
	p := mustCompile(t, "index.ts", src)
	for _, tc := range []struct{ base, want string }{
		{"https://gw.example.com/fhir/R4/", `["https://gw.example.com/fhir/R4/Patient/1/$everything","https://gw.example.com/fhir/R4/Patient?_count=2&name=a+b","https://gw.example.com/fhir/R4/Patient","https://gw.example.com/"]`},
		{"http://localhost:8080/api/fhir/", `["http://localhost:8080/api/fhir/Patient/1/$everything","http://localhost:8080/api/fhir/Patient?_count=2&name=a+b","http://localhost:8080/api/fhir/Patient","http://localhost:8080/"]`},
	} {
		req := Request{Code: p.JS, Timeout: 5 * time.Second, Event: jsonEvent(t, `{}`), FHIRBaseURL: tc.base}
		for name, exec := range map[string]Executor{"in process": New(Options{}), "worker": newTestPool(t, PoolOptions{})} {
			res, err := exec.Run(ctxT(t), req)
			if err != nil || res.Outcome != OutcomeSuccess || string(res.Body) != tc.want {
				t.Errorf("%s, %s: %v %+v\nwant %s", name, tc.base, err, res, tc.want)
			}
		}
	}
}

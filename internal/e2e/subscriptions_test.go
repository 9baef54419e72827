package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fhirStandIn is a loopback FHIR server that keeps resources and searches
// them (by _id and family, with _summary=count), versions them, and
// answers transactions: enough for the gate's subscriptions to match
// against the backend's own search.
type fhirStandIn struct {
	*httptest.Server
	mu   sync.Mutex
	res  map[string]map[string]any // "Type/id" → resource
	next int
}

func newFHIRStandIn(t *testing.T) *fhirStandIn {
	f := &fhirStandIn{res: map[string]map[string]any{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fhirStandIn) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/fhir+json")
	segs := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/fhir/R4"), "/"), "/")
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(segs) == 1 && segs[0] == "" && r.Method == http.MethodPost {
		f.transaction(w, body)
		return
	}
	status, out, loc := f.one(r.Method, segs, r.URL.Query(), body)
	if loc != "" {
		w.Header().Set("Location", loc)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(out)
}

// one answers a single interaction; the caller holds mu.
func (f *fhirStandIn) one(method string, segs []string, q url.Values, body []byte) (int, any, string) {
	typ := segs[0]
	switch {
	case method == http.MethodPost && len(segs) == 1, method == http.MethodPut && len(segs) == 2:
		var res map[string]any
		if json.Unmarshal(body, &res) != nil {
			return 400, map[string]any{"resourceType": "OperationOutcome"}, ""
		}
		status := 201
		if method == http.MethodPut {
			res["id"] = segs[1]
			if _, ok := f.res[typ+"/"+segs[1]]; ok {
				status = 200
			}
		} else {
			f.next++
			res["id"] = fmt.Sprintf("p%d", f.next)
		}
		f.next++
		version := fmt.Sprint(f.next)
		res["meta"] = map[string]any{"versionId": version}
		ref := typ + "/" + res["id"].(string)
		f.res[ref] = res
		return status, res, "/fhir/R4/" + ref + "/_history/" + version
	case method == http.MethodDelete && len(segs) == 2:
		delete(f.res, typ+"/"+segs[1])
		return 200, map[string]any{"resourceType": "OperationOutcome"}, ""
	case method == http.MethodGet && len(segs) == 2:
		if res, ok := f.res[typ+"/"+segs[1]]; ok {
			return 200, res, ""
		}
		return 404, map[string]any{"resourceType": "OperationOutcome"}, ""
	case method == http.MethodGet && len(segs) == 1:
		var hits []any
		for ref, res := range f.res {
			if !strings.HasPrefix(ref, typ+"/") || (q.Get("_id") != "" && res["id"] != q.Get("_id")) {
				continue
			}
			if fam := q.Get("family"); fam != "" && !strings.Contains(fmt.Sprint(res["name"]), fam) {
				continue
			}
			hits = append(hits, map[string]any{"resource": res})
		}
		b := map[string]any{"resourceType": "Bundle", "type": "searchset", "total": len(hits)}
		if q.Get("_summary") != "count" {
			b["entry"] = hits
		}
		return 200, b, ""
	}
	return 400, map[string]any{"resourceType": "OperationOutcome"}, ""
}

func (f *fhirStandIn) transaction(w http.ResponseWriter, body []byte) {
	var b struct {
		Entry []struct {
			Resource json.RawMessage `json:"resource"`
			Request  struct{ Method, URL string }
		} `json:"entry"`
	}
	_ = json.Unmarshal(body, &b)
	var entries []any
	for _, e := range b.Entry {
		status, out, loc := f.one(e.Request.Method, strings.Split(strings.Trim(e.Request.URL, "/"), "/"), nil, e.Resource)
		entries = append(entries, map[string]any{"resource": out, "response": map[string]any{"status": fmt.Sprint(status), "location": strings.TrimPrefix(loc, "/fhir/R4/")}})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"resourceType": "Bundle", "type": "transaction-response", "entry": entries})
}

// subscriptionsCaddyfile is the stack's with subscriptions on, a bot that
// logs its deliveries, and the searching stand-in as the backend.
func subscriptionsCaddyfile(backendURL string) string {
	tmpl := strings.Replace(stackCaddyfile, "\t\tmax_body 64KB\n", "\t\tmax_body 64KB\n\t\tsubscriptions on\n", 1)
	tmpl = strings.Replace(tmpl, "reverse_proxy {{.Backend}}", "reverse_proxy "+backendURL, 1)
	return strings.Replace(tmpl, "\t\t\tbot echo {", "\t\t\tbot subscriber {\n\t\t\t\tidentifier https://example.com/bots|subscriber\n\t\t\t\tsource {{.Testdata}}/subscriber.ts\n\t\t\t}\n\t\t\tbot echo {", 1)
}

// deliveries are the inputs the subscriber bot logged, from its AuditEvents.
func (s *stack) deliveries(t *testing.T, botID string, want int) []map[string]any {
	t.Helper()
	var out []map[string]any
	s.auditEvents(t, botID, func(entries []any) bool {
		out = out[:0]
		for _, e := range entries {
			desc, _ := e.(map[string]any)["resource"].(map[string]any)["outcomeDesc"].(string)
			_, logged, ok := strings.Cut(desc, "DELIVERED ")
			if !ok {
				continue
			}
			logged, _, _ = strings.Cut(logged, "\n")
			var d map[string]any
			if json.Unmarshal([]byte(logged), &d) == nil {
				out = append(out, d)
			}
		}
		return len(out) >= want
	})
	return out
}

func TestSubscriptionsRunBotsOnWritesThroughTheGate(t *testing.T) {
	be := newFHIRStandIn(t)
	s := startStackWith(t, subscriptionsCaddyfile(be.URL), "")
	alice := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	botID := s.botID(t, "alpha", "https://example.com/bots|subscriber")
	fhirBase := s.gateway + "/fhir/R4"
	interaction := func(code string) string {
		return `{"url":"https://medplum.com/fhir/StructureDefinition/subscription-supported-interaction","valueCode":"` + code + `"}`
	}
	sub := func(criteria string, exts ...string) string {
		r := do(t, "POST", fhirBase+"/Subscription", "application/fhir+json",
			`{"resourceType":"Subscription","status":"active","reason":"test","criteria":"`+criteria+`","channel":{"type":"rest-hook","endpoint":"Bot/`+botID+`"},"extension":[`+strings.Join(exts, ",")+`]}`, alice...)
		if r.status != 201 {
			t.Fatalf("creating a Subscription: %d %s", r.status, r.body)
		}
		return r.json(t)["id"].(string)
	}

	// Unsupported is a 400 naming it.
	r := do(t, "POST", fhirBase+"/Subscription", "application/fhir+json",
		`{"resourceType":"Subscription","status":"active","criteria":"Patient","channel":{"type":"websocket"}}`, alice...)
	if r.status != 400 || !strings.Contains(string(r.body), "channel.type") {
		t.Fatalf("websocket channel: %d %s", r.status, r.body)
	}

	sub("Patient", interaction("create"))
	r = do(t, "POST", fhirBase+"/Patient", "application/fhir+json", `{"resourceType":"Patient","name":[{"family":"First"}]}`, alice...)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	pid := r.json(t)["id"].(string)
	got := s.deliveries(t, botID, 1)
	in, _ := got[0]["input"].(map[string]any)
	hdr, _ := json.Marshal(got[0]["headers"])
	if in["id"] != pid || !strings.Contains(strings.ToLower(string(hdr)), `"x-medplum-interaction":"create"`) {
		t.Fatalf("delivery %v", got[0])
	}

	// An update, and a create of another type, trigger nothing.
	if r := do(t, "PUT", fhirBase+"/Patient/"+pid, "application/fhir+json", `{"resourceType":"Patient","id":"`+pid+`"}`, alice...); r.status != 200 {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", fhirBase+"/Observation", "application/fhir+json", `{"resourceType":"Observation","status":"final"}`, alice...); r.status != 201 {
		t.Fatalf("observation: %d %s", r.status, r.body)
	}

	// A delete delivers the last version as {deletedResource}.
	sub("Patient", interaction("delete"))
	if r := do(t, "DELETE", fhirBase+"/Patient/"+pid, "", "", alice...); r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	got = s.deliveries(t, botID, 2)
	if len(got) != 2 {
		t.Fatalf("%d deliveries after an update, another type and a delete, want 2: %v", len(got), got)
	}
	del := got[0]
	if _, ok := del["input"].(map[string]any)["deletedResource"]; !ok {
		del = got[1]
	}
	if dr, _ := del["input"].(map[string]any)["deletedResource"].(map[string]any); dr == nil || dr["id"] != pid {
		t.Fatalf("delete delivery %v", got)
	}

	// A transaction of three creates runs the bot three times.
	tx := `{"resourceType":"Bundle","type":"transaction","entry":[` +
		`{"resource":{"resourceType":"Patient","name":[{"family":"Tx"}]},"request":{"method":"POST","url":"Patient"}},` +
		`{"resource":{"resourceType":"Patient","name":[{"family":"Tx"}]},"request":{"method":"POST","url":"Patient"}},` +
		`{"resource":{"resourceType":"Patient","name":[{"family":"Tx"}]},"request":{"method":"POST","url":"Patient"}}]}`
	if r := do(t, "POST", fhirBase, "application/fhir+json", tx, alice...); r.status != 200 {
		t.Fatalf("transaction: %d %s", r.status, r.body)
	}
	if got = s.deliveries(t, botID, 5); len(got) != 5 {
		t.Fatalf("%d deliveries after a transaction of three, want 5", len(got))
	}
	time.Sleep(time.Second) // no late extra run
	if got = s.deliveries(t, botID, 5); len(got) != 5 {
		t.Fatalf("%d deliveries, want 5: %v", len(got), got)
	}
}

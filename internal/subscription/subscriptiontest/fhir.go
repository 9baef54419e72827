// Package subscriptiontest holds what the subscription engine's tests
// share: a loopback FHIR backend stand-in that keeps, versions and
// searches resources, so matching runs against a backend's own search.
package subscriptiontest

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
)

// FHIR is a loopback FHIR server that keeps resources and searches
// them (by _id and family, with _summary=count), versions them, and
// answers transactions: enough for the gate's subscriptions to match
// against the backend's own search.
type FHIR struct {
	*httptest.Server
	mu       sync.Mutex
	res      map[string]map[string]any // "Type/id" → resource
	next     int
	searches []url.Values
}

// Searches returns the search queries it answered.
func (f *FHIR) Searches() []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]url.Values(nil), f.searches...)
}

// NewFHIR starts the stand-in; it serves paths under /fhir/R4. Searches
// understand _id, family (a substring of the name) and _summary=count.
func NewFHIR(t testing.TB) *FHIR {
	t.Helper()
	f := &FHIR{res: map[string]map[string]any{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *FHIR) serve(w http.ResponseWriter, r *http.Request) {
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
func (f *FHIR) one(method string, segs []string, q url.Values, body []byte) (int, any, string) {
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
		f.searches = append(f.searches, q)
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

func (f *FHIR) transaction(w http.ResponseWriter, body []byte) {
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

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// memFHIR is the differential suite's FHIR backend: a loopback FHIR R4
// server keeping resources in memory, with create (also conditional, by
// If-None-Exist), read, update, JSON Patch, delete and search by a few
// parameters with _count/_offset paging, and Medplum's /email/v1/send. It
// records every write and email under the name of the current run, so that
// two runs of a bot on the same seed can be compared. Ids are a per-type
// counter from the seed, so the same writes in the same order get the same
// ids.
//
// POST /__run?name=… (a test hook, never reached through the gateway, whose
// bots only reach /fhir/R4/) restores the seed and starts recording under
// that name, for the Node harness, which runs every bot in one process.
type memFHIR struct {
	*httptest.Server
	seed    []map[string]any
	onBegin func(name string) // also called on /__run, to reset the other stand-ins

	mu      sync.Mutex
	byRef   map[string]map[string]any // "Type/id" → stored resource
	order   []string                  // refs in creation order: search results are stable
	counter map[string]int
	run     *runRecord
	runs    map[string]*runRecord
}

// runRecord is what one run wrote.
type runRecord struct {
	Writes []fhirWrite
	Emails []any
}

// fhirWrite is one write a run made: "POST Patient/3" and the resource as
// stored (nil for a delete).
type fhirWrite struct {
	Op       string `json:"op"`
	Resource any    `json:"resource,omitempty"`
}

const memFHIRBase = "/fhir/R4/"

func newMemFHIR(t *testing.T, seed []map[string]any, onBegin func(name string)) *memFHIR {
	m := &memFHIR{seed: seed, onBegin: onBegin, runs: map[string]*runRecord{}}
	m.begin("seed")
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

// begin restores the seed and records what follows under name.
func (m *memFHIR) begin(name string) {
	m.onBegin(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byRef, m.order, m.counter = map[string]map[string]any{}, nil, map[string]int{}
	for _, r := range m.seed {
		r = cloneJSON(r).(map[string]any)
		m.put(r["resourceType"].(string), r["id"].(string), r)
	}
	m.run = &runRecord{}
	m.runs[name] = m.run
}

// recorded returns what the run of that name wrote.
func (m *memFHIR) recorded(name string) runRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.runs[name]; r != nil {
		return runRecord{Writes: slices.Clone(r.Writes), Emails: slices.Clone(r.Emails)}
	}
	return runRecord{}
}

func (m *memFHIR) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		fhirOutcome(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	if r.URL.Path == "/__run" && r.Method == http.MethodPost {
		m.begin(r.URL.Query().Get("name"))
		w.WriteHeader(http.StatusNoContent)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.URL.Path == "/email/v1/send" && r.Method == http.MethodPost {
		var email any
		if err := json.Unmarshal(body, &email); err != nil {
			fhirOutcome(w, http.StatusBadRequest, "invalid", "email is not JSON")
			return
		}
		m.run.Emails = append(m.run.Emails, email)
		fhirOutcome(w, http.StatusOK, "informational", "All OK")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, memFHIRBase)
	if !ok {
		fhirOutcome(w, http.StatusNotFound, "not-found", "Not found")
		return
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 1 && r.Method == http.MethodGet:
		m.search(w, r, parts[0])
	case len(parts) == 1 && r.Method == http.MethodPost:
		m.create(w, r, parts[0], body)
	case len(parts) == 2 && r.Method == http.MethodGet:
		m.read(w, parts[0], parts[1])
	case len(parts) == 2 && r.Method == http.MethodPut:
		m.update(w, parts[0], parts[1], body)
	case len(parts) == 2 && r.Method == http.MethodPatch:
		m.patch(w, parts[0], parts[1], body)
	case len(parts) == 2 && r.Method == http.MethodDelete:
		if m.byRef[parts[0]+"/"+parts[1]] == nil {
			fhirOutcome(w, http.StatusNotFound, "not-found", "Not found")
			return
		}
		delete(m.byRef, parts[0]+"/"+parts[1])
		m.run.Writes = append(m.run.Writes, fhirWrite{Op: "DELETE " + parts[0] + "/" + parts[1]})
		fhirOutcome(w, http.StatusOK, "informational", "All OK")
	default:
		fhirOutcome(w, http.StatusMethodNotAllowed, "not-supported", "Unsupported operation")
	}
}

func (m *memFHIR) read(w http.ResponseWriter, typ, id string) {
	res := m.byRef[typ+"/"+id]
	if res == nil {
		fhirOutcome(w, http.StatusNotFound, "not-found", "Not found")
		return
	}
	writeFHIR(w, http.StatusOK, res)
}

func (m *memFHIR) create(w http.ResponseWriter, r *http.Request, typ string, body []byte) {
	res, ok := m.parse(w, typ, body)
	if !ok {
		return
	}
	if cond := r.Header.Get("If-None-Exist"); cond != "" {
		q, err := url.ParseQuery(cond)
		if err != nil {
			fhirOutcome(w, http.StatusBadRequest, "invalid", "bad If-None-Exist")
			return
		}
		if found := m.match(typ, q); len(found) == 1 {
			writeFHIR(w, http.StatusOK, found[0])
			return
		}
	}
	m.counter[typ]++
	id := "new-" + strings.ToLower(typ) + "-" + strconv.Itoa(m.counter[typ])
	m.put(typ, id, res)
	m.run.Writes = append(m.run.Writes, fhirWrite{Op: "POST " + typ + "/" + id, Resource: cloneJSON(res)})
	w.Header().Set("Location", memFHIRBase+typ+"/"+id)
	writeFHIR(w, http.StatusCreated, res)
}

func (m *memFHIR) update(w http.ResponseWriter, typ, id string, body []byte) {
	res, ok := m.parse(w, typ, body)
	if !ok {
		return
	}
	status := http.StatusOK
	if m.byRef[typ+"/"+id] == nil {
		status = http.StatusCreated
	}
	m.put(typ, id, res)
	m.run.Writes = append(m.run.Writes, fhirWrite{Op: "PUT " + typ + "/" + id, Resource: cloneJSON(res)})
	writeFHIR(w, status, res)
}

// patch applies a JSON Patch of add, replace and remove operations.
func (m *memFHIR) patch(w http.ResponseWriter, typ, id string, body []byte) {
	res := m.byRef[typ+"/"+id]
	if res == nil {
		fhirOutcome(w, http.StatusNotFound, "not-found", "Not found")
		return
	}
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	if err := json.Unmarshal(body, &ops); err != nil {
		fhirOutcome(w, http.StatusBadRequest, "invalid", "patch is not a JSON Patch array")
		return
	}
	res = cloneJSON(res).(map[string]any)
	for _, op := range ops {
		keys := strings.Split(strings.TrimPrefix(op.Path, "/"), "/")
		parent := any(res)
		for _, k := range keys[:len(keys)-1] {
			parent = jsonChild(parent, k)
		}
		obj, ok := parent.(map[string]any)
		last := keys[len(keys)-1]
		switch {
		case !ok:
			fhirOutcome(w, http.StatusBadRequest, "invalid", "patch path "+op.Path+" is not an object member")
			return
		case op.Op == "add" || op.Op == "replace":
			obj[last] = op.Value
		case op.Op == "remove":
			delete(obj, last)
		default:
			fhirOutcome(w, http.StatusBadRequest, "not-supported", "patch op "+op.Op)
			return
		}
	}
	m.put(typ, id, res)
	m.run.Writes = append(m.run.Writes, fhirWrite{Op: "PATCH " + typ + "/" + id, Resource: cloneJSON(res)})
	writeFHIR(w, http.StatusOK, res)
}

func jsonChild(v any, key string) any {
	switch v := v.(type) {
	case map[string]any:
		return v[key]
	case []any:
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(v) {
			return v[i]
		}
	}
	return nil
}

func (m *memFHIR) parse(w http.ResponseWriter, typ string, body []byte) (map[string]any, bool) {
	var res map[string]any
	if err := json.Unmarshal(body, &res); err != nil || res["resourceType"] != typ {
		fhirOutcome(w, http.StatusBadRequest, "invalid", "body is not a "+typ+" resource")
		return nil, false
	}
	return res, true
}

// put stores res under typ/id with a new version.
func (m *memFHIR) put(typ, id string, res map[string]any) {
	ref := typ + "/" + id
	old := m.byRef[ref]
	version := 1
	if old != nil {
		v, _ := strconv.Atoi(old["meta"].(map[string]any)["versionId"].(string))
		version = v + 1
	} else {
		m.order = append(m.order, ref)
	}
	res["id"] = id
	meta, _ := res["meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["versionId"] = strconv.Itoa(version)
	meta["lastUpdated"] = time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	res["meta"] = meta
	m.byRef[ref] = res
}

// search answers a searchset of typ matching the query, _count (default
// 20) at a time from _offset, with a next link while more remain.
func (m *memFHIR) search(w http.ResponseWriter, r *http.Request, typ string) {
	q := r.URL.Query()
	count, offset := 20, 0
	if v := q.Get("_count"); v != "" {
		count, _ = strconv.Atoi(v)
	}
	if v := q.Get("_offset"); v != "" {
		offset, _ = strconv.Atoi(v)
	}
	found := m.match(typ, q)
	page := found[min(offset, len(found)):min(offset+count, len(found))]
	entries := []any{}
	base := requestBase(r)
	for _, res := range page {
		entries = append(entries, map[string]any{"fullUrl": base + typ + "/" + res["id"].(string), "resource": res})
	}
	links := []any{map[string]any{"relation": "self", "url": base + typ + "?" + q.Encode()}}
	if offset+count < len(found) {
		q.Set("_offset", strconv.Itoa(offset+count))
		q.Set("_count", strconv.Itoa(count))
		links = append(links, map[string]any{"relation": "next", "url": base + typ + "?" + q.Encode()})
	}
	writeFHIR(w, http.StatusOK, map[string]any{
		"resourceType": "Bundle", "type": "searchset", "total": len(found), "entry": entries, "link": links,
	})
}

// requestBase is the FHIR base URL as the client sees it: a gateway in
// front forwards its own host.
func requestBase(r *http.Request) string {
	host := r.Host
	if h := r.Header.Get("X-Forwarded-Host"); h != "" {
		host = h
	}
	return "http://" + host + memFHIRBase
}

// match returns the resources of typ matching every supported search
// parameter in q, in creation order.
func (m *memFHIR) match(typ string, q url.Values) []map[string]any {
	var out []map[string]any
	for _, ref := range m.order {
		res := m.byRef[ref]
		if res == nil || res["resourceType"] != typ {
			continue
		}
		ok := true
		for name, values := range q {
			if !strings.HasPrefix(name, "_") || name == "_id" {
				ok = ok && matchParam(res, name, values[0])
			}
		}
		if ok {
			out = append(out, res)
		}
	}
	return out
}

// matchParam reports whether res matches one search parameter; a value
// with commas matches any of them.
func matchParam(res map[string]any, name, value string) bool {
	for _, v := range strings.Split(value, ",") {
		if matchOne(res, name, v) {
			return true
		}
	}
	return false
}

func matchOne(res map[string]any, name, value string) bool {
	switch name {
	case "_id":
		return res["id"] == value
	case "identifier":
		return anyToken(res["identifier"], "system", "value", value)
	case "code":
		cc, _ := res["code"].(map[string]any)
		return cc != nil && anyToken(cc["coding"], "system", "code", value)
	case "status":
		return res["status"] == value
	case "subject", "patient":
		for _, field := range []string{"subject", "patient"} {
			if ref, _ := res[field].(map[string]any); ref != nil && ref["reference"] == value {
				return true
			}
		}
		return false
	case "name", "family":
		names, _ := res["name"].([]any)
		for _, n := range names {
			nm, _ := n.(map[string]any)
			parts := []any{nm["family"]}
			if name == "name" {
				given, _ := nm["given"].([]any)
				parts = append(parts, given...)
			}
			for _, p := range parts {
				if s, _ := p.(string); strings.HasPrefix(strings.ToLower(s), strings.ToLower(value)) {
					return true
				}
			}
		}
		return false
	default:
		return false // an unsupported parameter matches nothing, rather than everything
	}
}

// anyToken reports whether any element of list (identifiers or codings)
// matches a token search value: "system|code", "|code", "system|" or "code".
func anyToken(list any, systemKey, codeKey, value string) bool {
	items, _ := list.([]any)
	system, code, hasSystem := strings.Cut(value, "|")
	if !hasSystem {
		system, code = "", value
	}
	for _, it := range items {
		m, _ := it.(map[string]any)
		if m == nil {
			continue
		}
		if hasSystem && m[systemKey] != system && !(system == "" && m[systemKey] == nil) {
			continue
		}
		if code == "" || m[codeKey] == code {
			return true
		}
	}
	return false
}

func writeFHIR(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/fhir+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fhirOutcome answers an OperationOutcome as Medplum's server does, with
// the outcome id Medplum gives (not-found, allok, …).
func fhirOutcome(w http.ResponseWriter, status int, code, text string) {
	severity, id := "error", code
	if status < 300 {
		severity, id = "information", "allok"
	}
	writeFHIR(w, status, map[string]any{
		"resourceType": "OperationOutcome", "id": id,
		"issue": []any{map[string]any{"severity": severity, "code": code, "details": map[string]any{"text": text}}},
	})
}

// cloneJSON deep-copies a decoded JSON value.
func cloneJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("cloneJSON: %v", err))
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

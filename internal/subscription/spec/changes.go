package spec

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/fhirgate/fhirgate/internal/fhir"
)

// Change is one resource a write created, updated or deleted.
type Change struct {
	Interaction string `json:"interaction"`
	Type        string `json:"type"`
	ID          string `json:"id"`
	// Version is the versionId written, when the answer told it.
	Version string `json:"version,omitempty"`
	// Resource is the version written as the answer carried it (nil with
	// Prefer: return=minimal), or on a delete the last version read
	// before it.
	Resource json.RawMessage `json:"resource,omitempty"`
	// Matched are, on a delete, the Subscriptions with search parameters
	// whose search found the resource just before the delete (after it,
	// the backend finds nothing to match).
	Matched []string `json:"matched,omitempty"`
}

// Ref is the change's "Type/id".
func (c *Change) Ref() string { return c.Type + "/" + c.ID }

// Request is a write the gate passed: its method, its path below the
// FHIR base in segments, and for a batch or transaction its body.
type Request struct {
	Method   string
	Segments []string
	Body     []byte
}

// Response is the backend's answer to it.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Deleted holds the last version of each resource read before a delete,
// by "Type/id".
type Deleted map[string]json.RawMessage

// IsWrite tells whether a request under the FHIR base may change
// resources: create, update, patch, delete of a type or instance, and a
// batch or transaction at the base. Operations ($…) and _search are not.
func IsWrite(method string, segs []string) bool {
	switch {
	case len(segs) == 0:
		return method == http.MethodPost
	case strings.HasPrefix(segs[len(segs)-1], "$") || strings.HasPrefix(segs[len(segs)-1], "_"):
		return false
	case len(segs) == 1:
		return method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch || method == http.MethodDelete
	case len(segs) == 2:
		return method == http.MethodPut || method == http.MethodPatch || method == http.MethodDelete
	}
	return false
}

// Changes returns what a write changed, read from the backend's answer:
// ids and versions from Location, the body's id and meta.versionId, and a
// Bundle's entry.response. A failed write changed nothing.
func Changes(req Request, resp Response, deleted Deleted) []Change {
	if resp.Status < 200 || resp.Status >= 300 {
		return nil
	}
	if len(req.Segments) == 0 {
		return bundleChanges(req.Body, resp.Body, deleted)
	}
	typ := req.Segments[0]
	var c Change
	switch req.Method {
	case http.MethodPost:
		if resp.Status != http.StatusCreated {
			return nil // a conditional create that found the resource
		}
		c.Interaction = Create
	case http.MethodPut:
		c.Interaction = Update
		if resp.Status == http.StatusCreated {
			c.Interaction = Create
		}
	case http.MethodPatch:
		c.Interaction = Update
	case http.MethodDelete:
		return deleteChanges(typ, req.Segments, deleted)
	default:
		return nil
	}
	c.Type = typ
	if len(req.Segments) == 2 {
		c.ID = req.Segments[1]
	}
	if t, id, v := parseLocation(resp.Header.Get("Location")); t == typ && id != "" {
		c.ID, c.Version = id, v
	}
	if res := resourceOf(resp.Body); res != nil && res.ResourceType == typ && (c.ID == "" || res.ID == c.ID) {
		c.ID, c.Resource = res.ID, resp.Body
		if res.Meta.VersionID != "" {
			c.Version = res.Meta.VersionID
		}
	}
	if c.ID == "" {
		return nil
	}
	return []Change{c}
}

// deleteChanges are the resources a delete removed: the instance, or
// for a conditional delete the ones read before it.
func deleteChanges(typ string, segs []string, deleted Deleted) []Change {
	var out []Change
	if len(segs) == 2 {
		return []Change{{Interaction: Delete, Type: typ, ID: segs[1], Resource: deleted[typ+"/"+segs[1]]}}
	}
	for ref, res := range deleted {
		if t, id, ok := strings.Cut(ref, "/"); ok && t == typ {
			out = append(out, Change{Interaction: Delete, Type: t, ID: id, Resource: res})
		}
	}
	return out
}

type minimalResource struct {
	ResourceType string `json:"resourceType"`
	ID           string `json:"id"`
	Meta         struct {
		VersionID string `json:"versionId"`
	} `json:"meta"`
}

func resourceOf(body []byte) *minimalResource {
	var r minimalResource
	if len(body) == 0 || json.Unmarshal(body, &r) != nil || r.ResourceType == "" || r.ID == "" {
		return nil
	}
	return &r
}

// parseLocation reads "…/Type/id[/_history/vid]", absolute or relative.
func parseLocation(loc string) (typ, id, version string) {
	if i := strings.IndexAny(loc, "?#"); i >= 0 {
		loc = loc[:i]
	}
	segs := strings.Split(strings.Trim(loc, "/"), "/")
	n := len(segs)
	if n >= 4 && segs[n-2] == "_history" {
		version, segs, n = segs[n-1], segs[:n-2], n-2
	}
	if n < 2 || !fhir.IsResourceType(segs[n-2]) {
		return "", "", ""
	}
	return segs[n-2], segs[n-1], version
}

type bundle struct {
	ResourceType string `json:"resourceType"`
	Type         string `json:"type"`
	Entry        []struct {
		Resource json.RawMessage `json:"resource"`
		Request  *struct {
			Method string `json:"method"`
			URL    string `json:"url"`
		} `json:"request"`
		Response *struct {
			Status   string `json:"status"`
			Location string `json:"location"`
		} `json:"response"`
	} `json:"entry"`
}

// bundleChanges reads a batch or transaction: request entry i is answered
// by response entry i.
func bundleChanges(reqBody, respBody []byte, deleted Deleted) []Change {
	var req, resp bundle
	if json.Unmarshal(reqBody, &req) != nil || json.Unmarshal(respBody, &resp) != nil ||
		req.ResourceType != "Bundle" || (req.Type != "batch" && req.Type != "transaction") {
		return nil
	}
	var out []Change
	for i, e := range req.Entry {
		if e.Request == nil || i >= len(resp.Entry) || resp.Entry[i].Response == nil {
			continue
		}
		r := resp.Entry[i]
		status, _ := strconv.Atoi(strings.Fields(r.Response.Status + " 0")[0])
		if status < 200 || status >= 300 {
			continue
		}
		path, _, _ := strings.Cut(e.Request.URL, "?")
		segs := strings.Split(strings.Trim(path, "/"), "/")
		if segs[0] == "" || !fhir.IsResourceType(segs[0]) || len(segs) > 2 {
			continue
		}
		method := strings.ToUpper(e.Request.Method)
		if method == http.MethodDelete {
			out = append(out, deleteChanges(segs[0], segs, deleted)...)
			continue
		}
		h := http.Header{}
		if r.Response.Location != "" {
			h.Set("Location", r.Response.Location)
		}
		out = append(out, Changes(Request{Method: method, Segments: segs}, Response{Status: status, Header: h, Body: r.Resource}, nil)...)
	}
	return out
}

// BundleDeletes lists the instance deletes of a batch or transaction
// request ("Type/id"), so their last versions can be read first.
func BundleDeletes(reqBody []byte) []string {
	var req bundle
	if json.Unmarshal(reqBody, &req) != nil {
		return nil
	}
	var out []string
	for _, e := range req.Entry {
		if e.Request == nil || !strings.EqualFold(e.Request.Method, http.MethodDelete) {
			continue
		}
		segs := strings.Split(strings.Trim(e.Request.URL, "/"), "/")
		if len(segs) == 2 && fhir.IsResourceType(segs[0]) && !strings.Contains(e.Request.URL, "?") {
			out = append(out, segs[0]+"/"+segs[1])
		}
	}
	return out
}

// BundleTypes lists the resource types a batch or transaction request
// writes, with the interactions its entries may cause.
func BundleTypes(reqBody []byte) map[string][]string {
	var req bundle
	if json.Unmarshal(reqBody, &req) != nil {
		return nil
	}
	out := map[string][]string{}
	for _, e := range req.Entry {
		if e.Request == nil {
			continue
		}
		path, _, _ := strings.Cut(e.Request.URL, "?")
		typ, _, _ := strings.Cut(strings.Trim(path, "/"), "/")
		switch strings.ToUpper(e.Request.Method) {
		case http.MethodPost:
			out[typ] = append(out[typ], Create)
		case http.MethodPut:
			out[typ] = append(out[typ], Create, Update)
		case http.MethodPatch:
			out[typ] = append(out[typ], Update)
		case http.MethodDelete:
			out[typ] = append(out[typ], Delete)
		}
	}
	return out
}

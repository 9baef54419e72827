package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/oauth"
)

// maxBackendResponse bounds what fhirgate's own operations read from the
// backend (a bot's FHIR calls, a profile): 16 MiB.
const maxBackendResponse = 16 << 20

// Backend sends requests on to the next handler (normally the user's
// reverse_proxy) as the authenticated caller: the same identity headers,
// the same upstream credentials, the same proxy settings as a request the
// caller made directly. fhirgate's own operations use it to reach the FHIR
// backend without a second configuration of where it is. A Backend from
// BackendFor has no request: each call is carried through the site's
// handler chain (backend_route.go).
type Backend struct {
	g  *Gateway
	id *oauth.Identity
	// orig and next are the request the Backend's calls are made from and
	// the handler after the gate; both nil for a request-less Backend.
	orig *http.Request
	next Next
	// authorized: every request is decided against the caller's scopes
	// first (a bot's FHIR calls), as the caller's own requests are.
	authorized bool
}

// BackendResponse is a backend answer.
type BackendResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends one request. path is relative to the FHIR base and escaped, e.g.
// "Patient/123". ctx must descend from the original request's context (it
// carries Caddy's per-request state), if there is one; it may outlive the
// request itself.
// For fhirgate's operations (bots) the request is first authorized against
// the caller's scopes: a refusal is answered as the gate answers it (403
// OperationOutcome) and never reaches the backend.
func (b *Backend) Do(ctx context.Context, method, path string, query url.Values, body []byte, header http.Header) (*BackendResponse, error) {
	if !b.authorized {
		return b.do(ctx, method, path, query, body, header)
	}
	denied, check, ok := b.authorize(ctx, method, path, query, body, header)
	if !ok {
		return denied, nil
	}
	watch := b.watchBackendWrite(ctx, method, path, query.Encode(), body, header)
	resp, err := b.do(ctx, method, path, query, body, header)
	if watch != nil && err == nil && resp.Status >= 200 && resp.Status < 300 {
		watch.Done(ctx, resp, false)
	}
	if err != nil || check == nil || resp.Status < 200 || resp.Status >= 300 {
		return resp, err
	}
	if e := check.CheckResponse(resp.Body); e != nil {
		return deniedResponse(e), nil
	}
	return resp, nil
}

// do sends one request as Do describes, without authorizing it.
func (b *Backend) do(ctx context.Context, method, path string, query url.Values, body []byte, header http.Header) (*BackendResponse, error) {
	if b.orig == nil {
		return b.doCarried(ctx, method, path, query, body, header)
	}
	rawPath := b.g.o.FHIRBase + "/" + strings.TrimPrefix(path, "/")
	if path == "" {
		rawPath = b.g.o.FHIRBase
	}
	unescaped, err := url.PathUnescape(rawPath)
	if err != nil {
		return nil, fmt.Errorf("backend path %q: %w", path, err)
	}
	u := *b.orig.URL
	u.Path, u.RawPath, u.RawQuery, u.Fragment = unescaped, rawPath, query.Encode(), ""
	if hasMethodOverride(u.RawQuery) {
		return badRequest(methodOverrideRefused), nil
	}

	req := b.orig.Clone(ctx)
	req.Method = method
	req.URL = &u
	req.RequestURI = u.RequestURI()
	req.Header = http.Header{"Accept": {"application/fhir+json"}}
	maps.Copy(req.Header, header)
	b.g.strip.strip(req.Header)
	req.Body, req.ContentLength = http.NoBody, 0
	if body != nil {
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	req.GetBody = nil
	b.g.setIdentity(req, b.id)

	rec := newRecorder()
	w, finish, err := b.g.toTenant(rec, req, ParseTarget(b.g.o.FHIRBase, req.URL), b.id.ProjectID)
	if err != nil {
		return badRequest(err.Error()), nil
	}
	err = b.next(w, req)
	finish()
	if err != nil {
		if b.g.o.ErrorStatus == nil {
			return nil, fmt.Errorf("backend request: %w", err)
		}
		status := b.g.o.ErrorStatus(err)
		if status == 0 {
			return nil, fmt.Errorf("backend request: %w", err)
		}
		return &BackendResponse{Status: status, Header: http.Header{}}, nil
	}
	if rec.overflow {
		return nil, errors.New("backend response exceeds 16 MiB")
	}
	return rec.Response(), nil
}

// badRequest is a 400 the gate answers in the backend's place.
func badRequest(msg string) *BackendResponse {
	body := fhir.MarshalOutcome(http.StatusBadRequest, msg)
	return &BackendResponse{Status: http.StatusBadRequest, Header: http.Header{"Content-Type": {fhir.ContentType}}, Body: body}
}

// recorder captures the next handler's response in memory, bounded to
// 16 MiB, for Backend.Do. (httptest's recorder would register a test flag
// in the Caddy binary.)
type recorder struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	overflow bool
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

// Header implements http.ResponseWriter.
func (r *recorder) Header() http.Header { return r.header }

// WriteHeader implements http.ResponseWriter; the first status wins.
func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

// Write implements http.ResponseWriter.
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len()+len(p) > maxBackendResponse {
		r.overflow = true
		return 0, errors.New("response too large")
	}
	return r.body.Write(p)
}

// Flush lets proxies that flush as they stream write into the recorder.
func (r *recorder) Flush() {}

// Response returns what was recorded.
func (r *recorder) Response() *BackendResponse {
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	return &BackendResponse{Status: status, Header: r.header, Body: r.body.Bytes()}
}

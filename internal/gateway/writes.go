package gateway

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/fhirgate/fhirgate/internal/oauth"
)

// WriteHook is told of the requests under the FHIR base that may change
// resources, as the gate passes them to the backend: a client's own, and
// those fhirgate's operations (a bot's medplum calls) send through a
// Backend. Subscriptions are built on it (internal/subscription).
type WriteHook interface {
	// Watch is asked before a request other than GET or HEAD goes on; it
	// returns nil when nothing watches it. It may read through
	// Write.Backend first (a delete's last version): that read delays the
	// request.
	Watch(ctx context.Context, w *Write) WriteWatch
}

// WriteWatch receives the answer to a watched write.
type WriteWatch interface {
	// Done is given the backend's answer before any of it reaches the
	// client, so work it records durably is there for every answer the
	// client sees. Truncated says the body exceeded what the gate holds
	// (16 MiB) and Body has only its start.
	Done(ctx context.Context, resp *BackendResponse, truncated bool)
}

// Write is a request a WriteHook watches.
type Write struct {
	Method string
	// Segments are the path below the FHIR base, unescaped.
	Segments []string
	// RawQuery is the request's query string.
	RawQuery string
	// Body is the request body of a POST to the base (a batch or
	// transaction); nil otherwise.
	Body     []byte
	Identity *oauth.Identity
	// Backend reaches the backend as the writer, unauthorized (the gate's
	// own reads); its Do may outlive the request when given a context
	// that does (context.WithoutCancel of the request's).
	Backend *Backend
	// Header is the request's header (read only).
	Header http.Header
}

// watchWrite asks the WriteHook about an authenticated request the gate
// is about to send on. It returns the writer to serve it through and the
// func to call once next has returned, or ok false when it answered the
// request itself (a batch body too large to read).
func (g *Gateway) watchWrite(w http.ResponseWriter, r *http.Request, id *oauth.Identity, t Target, next Next) (http.ResponseWriter, func(), bool) {
	if g.o.Writes == nil || !t.Under || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return w, func() {}, true
	}
	wr := &Write{Method: r.Method, Segments: t.Segments, RawQuery: r.URL.RawQuery, Identity: id, Header: r.Header,
		Backend: &Backend{g: g, id: id, orig: r, next: next}}
	if len(t.Segments) == 0 && r.Method == http.MethodPost {
		body, ok := readBody(w, r)
		if !ok {
			return nil, nil, false
		}
		wr.Body = body
	}
	watch := g.o.Writes.Watch(r.Context(), wr)
	if watch == nil {
		return w, func() {}, true
	}
	c := &captureWriter{w: w}
	return c, func() { c.finish(r.Context(), watch) }, true
}

// watchBackendWrite is watchWrite for a request fhirgate's operations
// send through b.
func (b *Backend) watchBackendWrite(ctx context.Context, method, path string, query string, body []byte, header http.Header) WriteWatch {
	if b.g.o.Writes == nil || method == http.MethodGet || method == http.MethodHead {
		return nil
	}
	raw := b.g.o.FHIRBase + "/" + strings.TrimPrefix(path, "/")
	unescaped, err := url.PathUnescape(raw)
	if err != nil {
		return nil
	}
	t := ParseTarget(b.g.o.FHIRBase, &url.URL{Path: unescaped, RawPath: raw})
	if !t.Under {
		return nil
	}
	wr := &Write{Method: method, Segments: t.Segments, RawQuery: query, Identity: b.id, Header: header,
		Backend: &Backend{g: b.g, id: b.id, orig: b.orig, next: b.next}}
	if len(t.Segments) == 0 && method == http.MethodPost {
		wr.Body = body
	}
	return b.g.o.Writes.Watch(ctx, wr)
}

// captureWriter holds a watched write's successful answer until the
// WriteWatch has seen it; other answers pass straight through.
type captureWriter struct {
	w         http.ResponseWriter
	status    int
	hold      bool
	body      bytes.Buffer
	truncated bool
}

// Header implements http.ResponseWriter.
func (c *captureWriter) Header() http.Header { return c.w.Header() }

// WriteHeader implements http.ResponseWriter.
func (c *captureWriter) WriteHeader(status int) {
	if c.status != 0 || status < 200 {
		if c.status == 0 {
			c.w.WriteHeader(status) // interim
		}
		return
	}
	c.status = status
	c.hold = status < 300
	if !c.hold {
		c.w.WriteHeader(status)
	}
}

// Write implements http.ResponseWriter.
func (c *captureWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if !c.hold {
		return c.w.Write(p)
	}
	if c.body.Len()+len(p) > maxBackendResponse {
		// Too large to hold: the watch gets the start, the client all.
		n := maxBackendResponse - c.body.Len()
		c.body.Write(p[:n])
		c.truncated = true
		return len(p), c.release(p[n:])
	}
	return c.body.Write(p)
}

// Flush lets proxies that flush as they stream write through it; a held
// answer is flushed at finish.
func (c *captureWriter) Flush() {
	if !c.hold {
		if f, ok := c.w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// release sends what is held, then rest, and stops holding.
func (c *captureWriter) release(rest []byte) error {
	c.hold = false
	c.w.WriteHeader(c.status)
	if _, err := c.w.Write(c.body.Bytes()); err != nil {
		return err
	}
	_, err := c.w.Write(rest)
	return err
}

// finish shows a held answer to the watch, then sends it.
func (c *captureWriter) finish(ctx context.Context, watch WriteWatch) {
	if c.status < 200 || c.status >= 300 {
		return
	}
	resp := &BackendResponse{Status: c.status, Header: c.w.Header(), Body: c.body.Bytes()}
	watch.Done(ctx, resp, c.truncated)
	if c.hold {
		c.hold = false
		c.w.WriteHeader(c.status)
		_, _ = c.w.Write(c.body.Bytes())
	}
}

package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/fhirgate/fhirgate/internal/authz"
	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/oauth"
)

// maxAuthorizedBody bounds the request body the gate reads to authorize a
// batch, a POST _search or a patient-context write: 16 MiB.
const maxAuthorizedBody = 16 << 20

// patientOf returns the patient context of a caller: the Patient id of
// its profile when the profile is a Patient.
func patientOf(id *oauth.Identity) string {
	if id.Patient != "" {
		return id.Patient // the token's patient context
	}
	p, _ := strings.CutPrefix(id.Profile, "Patient/")
	if p == id.Profile {
		return ""
	}
	return p
}

// authorize decides a request under the base before it goes on. It
// answers the request itself and returns false when it is refused; it may
// replace the body (read to decide) and returns the writer the request
// must be served through (one that checks the answer, when the decision
// needs that) and a finish func to call after next.
func (g *Gateway) authorize(w http.ResponseWriter, r *http.Request, id *oauth.Identity, t Target, next Next) (http.ResponseWriter, func() error, bool) {
	acc := g.authz.Access(id.Scope, patientOf(id))
	req := &authz.Request{Method: r.Method, Segments: t.Segments, Header: r.Header}
	if !t.Under {
		// Gated on a lenient reading only (a ;param or encoded separator in
		// the base): refuse rather than guess what the backend will serve.
		if acc.Full() {
			return w, nil, true
		}
		writeDenied(w, fhir.NewError(http.StatusForbidden, "insufficient scope: the path is not one the gate can authorize"))
		return nil, nil, false
	}
	if !acc.Full() {
		// Full access needs only the path; a scoped token's query must
		// parse, or the gate could miss a parameter the backend reads.
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			writeDenied(w, fhir.NewError(http.StatusBadRequest, "the query string does not parse"))
			return nil, nil, false
		}
		req.Query = q
	}
	if acc.NeedsBody(r.Method, t.Segments) {
		body, ok := readBody(w, r)
		if !ok {
			return nil, nil, false
		}
		req.Body = body
	}
	d := g.authz.Decide(acc, req)
	if d.Denied != nil {
		writeDenied(w, d.Denied)
		return nil, nil, false
	}
	be := &Backend{g: g, id: id, orig: r, next: next}
	for _, ref := range d.Stored {
		if e := checkStored(r.Context(), be, acc, ref); e != nil {
			writeDenied(w, e)
			return nil, nil, false
		}
	}
	if !d.CheckResponse {
		return w, nil, true
	}
	// The answer is read whole and checked before any of it is sent; ask
	// for it unencoded so it can be read.
	r.Header.Del("Accept-Encoding")
	rec := newRecorder()
	finish := func() error {
		if rec.overflow {
			writeDenied(w, fhir.NewError(http.StatusBadGateway, "the backend's answer is too large for the gate to check"))
			return nil
		}
		resp := rec.Response()
		if resp.Status >= 200 && resp.Status < 300 {
			if enc := resp.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
				writeDenied(w, fhir.NewError(http.StatusBadGateway, "the backend's answer is encoded ("+enc+"); the gate cannot check it"))
				return nil
			}
			if e := acc.CheckResponse(resp.Body); e != nil {
				writeDenied(w, e)
				return nil
			}
		}
		h := w.Header()
		for k, v := range resp.Header {
			h[k] = v
		}
		w.WriteHeader(resp.Status)
		_, _ = w.Write(resp.Body)
		return nil
	}
	return rec, finish, true
}

// writeDenied answers a refusal. A 403 never carries the WWW-Authenticate
// challenge: the token is valid, its scope is not enough.
func writeDenied(w http.ResponseWriter, e *fhir.Error) {
	fhir.WriteError(w, e)
}

// readBody reads a request body the gate must see to decide, and puts it
// back for the backend.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAuthorizedBody+1))
	_ = r.Body.Close()
	if err != nil {
		fhir.WriteOutcome(w, http.StatusBadRequest, "the request body could not be read")
		return nil, false
	}
	if len(body) > maxAuthorizedBody {
		fhir.WriteOutcome(w, http.StatusRequestEntityTooLarge, "the request body exceeds the 16 MiB the gate reads to authorize it")
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return body, true
}

// checkStored reads the stored version of ref as the caller and checks it
// is the caller's patient's. A resource that does not exist passes: an
// update then creates it, with a body already checked.
func checkStored(ctx context.Context, be *Backend, acc *authz.Access, ref string) *fhir.Error {
	resp, err := be.do(ctx, http.MethodGet, ref, nil, nil, nil)
	if err != nil {
		return fhir.NewError(http.StatusBadGateway, "the gate could not read "+ref+" to authorize the write")
	}
	switch {
	case resp.Status == http.StatusNotFound || resp.Status == http.StatusGone:
		return nil
	case resp.Status != http.StatusOK:
		return fhir.NewError(http.StatusBadGateway, "the gate could not read "+ref+" to authorize the write")
	}
	return acc.CheckStored(ref, resp.Body)
}

// authorizeBackend applies the gate to a request fhirgate's own operations
// (a bot's FHIR calls) send through a Backend: the same decision as for
// the caller's own request. It returns the answer to give instead of the
// backend's, or nil to go on (ok), and, when the decision says so, the
// access whose CheckResponse the backend's answer must pass.
func (b *Backend) authorize(ctx context.Context, method, p string, query url.Values, body []byte, header http.Header) (denied *BackendResponse, check *authz.Access, ok bool) {
	acc := b.g.authz.Access(b.id.Scope, patientOf(b.id))
	var segs []string
	for s := range strings.SplitSeq(p, "/") {
		d, err := url.PathUnescape(s)
		if err != nil {
			return deniedResponse(fhir.NewError(http.StatusForbidden, "insufficient scope: the path is not one the gate can authorize")), nil, false
		}
		if d != "" {
			segs = append(segs, d)
		}
	}
	h := header
	if h == nil {
		h = http.Header{}
	}
	d := b.g.authz.Decide(acc, &authz.Request{Method: method, Segments: segs, Query: query, Header: h, Body: body})
	if d.Denied != nil {
		return deniedResponse(d.Denied), nil, false
	}
	for _, ref := range d.Stored {
		if e := checkStored(ctx, b, acc, ref); e != nil {
			return deniedResponse(e), nil, false
		}
	}
	if d.CheckResponse {
		return nil, acc, true
	}
	return nil, nil, true
}

func deniedResponse(e *fhir.Error) *BackendResponse {
	return &BackendResponse{Status: e.Status, Header: http.Header{"Content-Type": {fhir.ContentType}}, Body: fhir.MarshalOutcome(e.Status, e.Message)}
}

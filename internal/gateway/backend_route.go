package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/fhirgate/fhirgate/internal/oauth"
)

// A run with no HTTP request of its own (an HL7 message over MLLP, a
// Subscription delivery, a cron tick, an async $execute on the replica
// that dequeues it) still reaches the backend exactly as a request's
// medplum calls do: same upstream_auth, backend_tenant, identity headers
// and, above all, the same next handler — the user's reverse_proxy with
// its transport, load balancing and header rules, which exists only inside
// the site's handler chain. So such a call is carried by a request sent
// through the site from its start (Options.Dispatch): when it reaches this
// Gateway, the gate does not authenticate it but runs the call with the
// request as it arrived and the next handler it was given, through the
// very code a request's Backend uses.
//
// What marks the carrier is a value in the request's context under an
// unexported key, never a header: nothing from outside the process can
// make or forge one. A carrier that reaches another Gateway (routing sent
// it to another site) is answered there with an error and goes no further.

// carrierKey is the context key of a carried backend call.
type carrierKey struct{}

// carrier is one backend call in flight through the site's handler chain.
type carrier struct {
	g       *Gateway
	reached bool
	run     func(orig *http.Request, next Next)
}

// errMisrouted answers a carrier that reached another Gateway.
const errMisrouted = "a request-less backend call reached a fhirgate handler other than the one it was sent through"

// serveCarrier runs a carried call if r carries one; it reports whether it
// did (the request is then answered).
func (g *Gateway) serveCarrier(w http.ResponseWriter, r *http.Request, next Next) bool {
	c, ok := r.Context().Value(carrierKey{}).(*carrier)
	if !ok {
		return false
	}
	if c.g != g {
		http.Error(w, errMisrouted, http.StatusMisdirectedRequest)
		return true
	}
	c.reached = true
	c.run(r, next)
	return true
}

// BackendFor returns a Backend for a run with no HTTP request of its own,
// acting as id: every call is authorized against id's scopes and patient
// context as the gate authorizes a request, then sent through the site's
// handler chain (Options.Dispatch) to the next handler with id's identity
// headers. ctx is unused today (the route is resolved per call) and kept
// so that a resolution needing I/O can honour it.
func (g *Gateway) BackendFor(_ context.Context, id *oauth.Identity) (*Backend, error) {
	if g.o.Dispatch == nil {
		return nil, errors.New("no backend route for runs without a request (the gateway has no dispatcher)")
	}
	if id == nil || id.ProjectID == "" {
		return nil, errors.New("a request-less backend needs an identity with a project")
	}
	return &Backend{g: g, id: id, authorized: true}, nil
}

// As returns a Backend on the same route acting as id instead: a bot
// that runs as itself reaches the backend with its own identity through
// its caller's request.
func (b *Backend) As(id *oauth.Identity) *Backend {
	c := *b
	c.id = id
	return &c
}

// Identity is whom the Backend acts as.
func (b *Backend) Identity() *oauth.Identity { return b.id }

// doCarried sends one call through the site's handler chain and runs it
// where it reaches this Gateway (see the top of this file).
func (b *Backend) doCarried(ctx context.Context, method, path string, query url.Values, body []byte, header http.Header) (*BackendResponse, error) {
	var resp *BackendResponse
	var err error
	c := &carrier{g: b.g, run: func(orig *http.Request, next Next) {
		inner := &Backend{g: b.g, id: b.id, orig: orig, next: next}
		resp, err = inner.do(orig.Context(), method, path, query, body, header)
	}}
	// The carrier only has to route to this Gateway: it is a bodiless,
	// credential-less GET of {fhir_base}/metadata, so that a site that
	// routes it elsewhere (past every fhirgate handler) sends on nothing
	// but a public read, whose answer is dropped. The call itself is
	// built from the carrier as it arrives, by do.
	req, rerr := http.NewRequestWithContext(context.WithValue(ctx, carrierKey{}, c), http.MethodGet, "http://fhirgate.invalid"+b.g.o.FHIRBase+"/metadata", http.NoBody)
	if rerr != nil {
		return nil, fmt.Errorf("the request-less route's carrier: %w", rerr)
	}
	rec := newRecorder()
	b.g.o.Dispatch(rec, req)
	if !c.reached {
		return nil, fmt.Errorf("the request-less backend route did not reach the fhirgate handler (the site answered %d)", rec.Response().Status)
	}
	return resp, err
}

package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/fhirgate/fhirgate/internal/authz"
	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/oauth"
)

// Defaults for Options.
const (
	DefaultFHIRBase = "/fhir/R4"
)

// DefaultPublicPaths are the FHIR endpoints servers conventionally serve
// without authentication, relative to the FHIR base.
var DefaultPublicPaths = []string{"/metadata", "/.well-known/smart-configuration"}

// DefaultPublicMethods are the methods a public path accepts without a
// token: reads, and the CORS preflight. A write to a public path needs a
// token like any other request.
var DefaultPublicMethods = []string{http.MethodGet, http.MethodHead, http.MethodOptions}

// Upstream authorization modes: what the backend sees in Authorization.
const (
	UpstreamStrip       = "strip"       // removed (default): the backend trusts the identity headers
	UpstreamPassthrough = "passthrough" // the caller's fhirgate token, unchanged
	UpstreamBearer      = "bearer"      // a fixed backend credential
)

// IdentityHeaders name the request headers that carry the caller's identity
// to the backend. Incoming copies are always removed first, so a client can
// never spoof them.
type IdentityHeaders struct {
	User    string // User id
	Profile string // e.g. Practitioner/123
	Project string // project id
	Client  string // client id
	Scope   string // granted scope
}

// DefaultIdentityHeaders are used for any name left empty.
var DefaultIdentityHeaders = IdentityHeaders{
	User:    "X-Fhirgate-User",
	Profile: "X-Fhirgate-Profile",
	Project: "X-Fhirgate-Project",
	Client:  "X-Fhirgate-Client",
	Scope:   "X-Fhirgate-Scope",
}

// Next continues a request down the handler chain.
type Next func(w http.ResponseWriter, r *http.Request) error

// Options configures a Gateway. OAuth is required.
type Options struct {
	// FHIRBase is the path prefix of the FHIR API. Default DefaultFHIRBase.
	FHIRBase string
	// PublicPaths below FHIRBase pass without a token. A path ending in
	// "/*" matches everything below it. Default DefaultPublicPaths; an empty
	// non-nil slice makes nothing public.
	PublicPaths []string
	// PublicMethods are the methods a request to a public path may use
	// without a token; any other method needs one. Names are matched
	// exactly (methods are case-sensitive), so each must be an upper-case
	// HTTP token such as GET. Empty means DefaultPublicMethods (to make
	// nothing public, leave PublicPaths empty instead).
	PublicMethods []string
	// PublicUpstreamAuth applies UpstreamAuth to public requests too. By
	// default a request served without a token reaches the backend with no
	// Authorization header at all, so an anonymous caller never borrows
	// the gateway's backend credential.
	PublicUpstreamAuth bool
	// UpstreamAuth is one of the Upstream* modes. Default UpstreamStrip.
	UpstreamAuth string
	// UpstreamToken is the credential sent with UpstreamBearer.
	UpstreamToken string
	// Headers name the identity headers. Empty names take the defaults.
	Headers IdentityHeaders

	// BasicAuth accepts "Authorization: Basic base64(client_id:secret)"
	// wherever a bearer token is accepted, as that client's own
	// credentials (Medplum's Basic authentication). Off by default.
	BasicAuth bool

	// TokenPassthrough are paths outside FHIRBase whose services verify
	// fhirgate's tokens themselves: a request to them keeps its fhirgate
	// token. Everywhere else outside FHIRBase an Authorization header
	// carrying a fhirgate token is removed before the request goes on. A
	// path ending in "/*" matches everything below it.
	TokenPassthrough []string
	// BackendTenant is how the backend tells projects apart: TenantNone
	// (default), TenantPath or TenantHeader. It applies to every
	// authenticated request sent on, fhirgate's own (a bot's FHIR calls)
	// included.
	BackendTenant string
	// TenantHeader names the header that carries the project id with
	// TenantHeader; clients' copies of it are always removed.
	TenantHeader string

	OAuth *oauth.Server

	// Operations, when set, claims authenticated requests that fhirgate
	// answers itself (bot operations): given the gate's reading of the
	// request's path, it returns their handler, or nil to let the request
	// continue to the backend. It is asked only for a request the gate
	// authenticated, and only when the Target is under FHIRBase.
	Operations func(t Target) Operation

	// Me answers GET /auth/me for an authenticated caller (Medplum's
	// session endpoint). Nil: /auth/me is not answered here.
	Me Operation

	// SiteOperations, when set, claims paths outside FHIRBase that
	// fhirgate answers itself for an authenticated caller (Medplum's
	// admin routes, such as POST /admin/projects/{id}/bot): given the
	// request's escaped path, it returns their handler, or nil. A claimed
	// request is never proxied; without a valid token it is a 401.
	SiteOperations func(escapedPath string) Operation

	// ErrorStatus reads the HTTP status out of an error the next handler
	// returned (Caddy handlers return errors for 502 and the like), so a
	// Backend call reports it as a status. 0 means "not an HTTP error".
	ErrorStatus func(error) int

	// OnAuthenticated is told of every authenticated request, so the Caddy
	// module can set placeholders.
	OnAuthenticated func(r *http.Request, id *oauth.Identity)

	// Writes, when set, is told of every write the gate passes to the
	// backend (Subscriptions).
	Writes WriteHook

	// Dispatch sends a request through the site's whole handler chain, as
	// if it had arrived from a client; it is how a run with no request of
	// its own reaches the backend (BackendFor, backend_route.go). It must
	// route the request to this Gateway. Nil: BackendFor fails.
	Dispatch func(w http.ResponseWriter, r *http.Request)

	// AllowedOperations are $operations authorized beyond the built-in
	// table (internal/authz), by name with its "$", each with the
	// permissions it needs on its path's type ("r", "rs"). Any other
	// operation is refused with 403.
	AllowedOperations map[string]string
}

// Operation answers an authenticated request fhirgate serves itself; it
// reaches the FHIR backend, when it needs to, through backend.
type Operation func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, backend *Backend)

// Gateway routes requests; see the package documentation.
type Gateway struct {
	o             Options
	base          string // normalised FHIRBase: lower case, for the views
	public        []string
	publicMethods []string
	passthrough   []string
	// strip are the request headers removed before anything else: the
	// identity headers and the override headers.
	strip headerSet
	// authz decides every authenticated request under the base against the
	// token's scopes.
	authz *authz.Authorizer
}

// New returns a Gateway.
func New(o Options) (*Gateway, error) {
	if o.OAuth == nil {
		return nil, errors.New("gateway: OAuth is required")
	}
	if o.FHIRBase == "" {
		o.FHIRBase = DefaultFHIRBase
	}
	if !strings.HasPrefix(o.FHIRBase, "/") {
		return nil, fmt.Errorf("fhir_base %q must start with /", o.FHIRBase)
	}
	o.FHIRBase = path.Clean(o.FHIRBase)
	if o.PublicPaths == nil {
		o.PublicPaths = DefaultPublicPaths
	}
	switch o.UpstreamAuth {
	case "":
		o.UpstreamAuth = UpstreamStrip
	case UpstreamStrip, UpstreamPassthrough:
	case UpstreamBearer:
		if o.UpstreamToken == "" {
			return nil, errors.New("upstream_auth bearer needs a token")
		}
	default:
		return nil, fmt.Errorf("upstream_auth %q: must be strip, passthrough or bearer", o.UpstreamAuth)
	}
	h := &o.Headers
	fill := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	fill(&h.User, DefaultIdentityHeaders.User)
	fill(&h.Profile, DefaultIdentityHeaders.Profile)
	fill(&h.Project, DefaultIdentityHeaders.Project)
	fill(&h.Client, DefaultIdentityHeaders.Client)
	fill(&h.Scope, DefaultIdentityHeaders.Scope)
	if err := checkTenancy(&o); err != nil {
		return nil, err
	}

	az, err := authz.New(authz.Options{FHIRBase: o.FHIRBase, Operations: o.AllowedOperations})
	if err != nil {
		return nil, fmt.Errorf("allowed operations: %w", err)
	}
	g := &Gateway{o: o, base: normalizePath(o.FHIRBase), authz: az}
	for _, p := range o.PublicPaths {
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("public path %q must start with /", p)
		}
		g.public = append(g.public, strings.ToLower(p))
	}
	if len(o.PublicMethods) == 0 {
		o.PublicMethods = DefaultPublicMethods
	}
	for _, m := range o.PublicMethods {
		if !isMethodToken(m) {
			return nil, fmt.Errorf("public method %q: must be an upper-case HTTP method name such as GET", m)
		}
	}
	g.publicMethods = o.PublicMethods
	for _, p := range o.TokenPassthrough {
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("token passthrough path %q must start with /", p)
		}
		g.passthrough = append(g.passthrough, cleanPath(p))
		if strings.HasSuffix(p, "/*") {
			g.passthrough[len(g.passthrough)-1] = cleanPath(strings.TrimSuffix(p, "/*")) + "/*"
		}
	}
	strip := append([]string{h.User, h.Profile, h.Project, h.Client, h.Scope}, overrideHeaders...)
	if o.TenantHeader != "" {
		strip = append(strip, o.TenantHeader)
	}
	g.strip = newHeaderSet(strip...)
	return g, nil
}

// Serve handles one request, calling next for everything fhirgate does not
// answer itself.
func (g *Gateway) Serve(w http.ResponseWriter, r *http.Request, next Next) error {
	if g.serveCarrier(w, r, next) {
		return nil
	}
	// Never let a client supply identity or override headers, whatever the
	// path: an X-Original-URL on a request outside the base would route it
	// into the base at a backend that honours it.
	g.strip.strip(r.Header)
	views := pathViews(r.URL)
	target := ParseTarget(g.o.FHIRBase, r.URL)
	underBase := target.Under || anyUnder(views[:], g.base)
	// A path that some reading puts under the base is gated even if
	// another reading is under /oauth2 (/oauth2/../fhir/R4/Patient).
	if !underBase && anyUnder(views[:], oauthPrefix) {
		g.serveOAuth(w, r)
		return nil
	}
	if h := g.ownEndpoint(r.URL.Path); h != nil {
		h(w, r)
		return nil
	}
	if r.URL.Path == "/auth/me" && g.o.Me != nil {
		id, aerr := g.authenticate(r)
		if aerr != nil {
			oauth.WriteAuthError(w, aerr)
			return nil
		}
		g.o.Me(w, r, id, &Backend{g: g, id: id, orig: r, next: next})
		return nil
	}
	if g.o.SiteOperations != nil {
		if op := g.o.SiteOperations(r.URL.EscapedPath()); op != nil {
			id, aerr := g.authenticate(r)
			if aerr != nil {
				oauth.WriteAuthError(w, aerr)
				return nil
			}
			if g.o.OnAuthenticated != nil {
				g.o.OnAuthenticated(r, id)
			}
			op(w, r, id, &Backend{g: g, id: id, orig: r, next: next})
			return nil
		}
	}
	// Gate the request if any reading of its path is under the base (the
	// canonical one, or one a lenient backend might take), and treat it as
	// public only if every reading is a public path.
	if !underBase {
		g.keepTokenHome(r, views[:])
		return next(w, r)
	}
	if hasMethodOverride(r.URL.RawQuery) {
		fhir.WriteOutcome(w, http.StatusBadRequest, methodOverrideRefused)
		return nil
	}
	if slices.Contains(g.publicMethods, r.Method) && g.allPublic(views[:]) {
		if g.o.PublicUpstreamAuth {
			g.applyUpstreamAuth(r)
		} else {
			r.Header.Del("Authorization")
		}
		return next(w, r)
	}
	id, aerr := g.authenticate(r)
	if aerr != nil {
		oauth.WriteAuthError(w, aerr)
		return nil
	}
	g.setIdentity(r, id)
	if g.o.OnAuthenticated != nil {
		g.o.OnAuthenticated(r, id)
	}
	// Authorize before anything acts on the request, fhirgate's own
	// operations included ($execute needs r on Bot).
	w, finish, ok := g.authorize(w, r, id, target, next)
	if !ok {
		return nil
	}
	if g.o.Operations != nil && target.Under {
		if op := g.o.Operations(target); op != nil {
			op(w, r, id, &Backend{g: g, id: id, orig: r, next: next, authorized: true})
			if finish != nil {
				return finish()
			}
			return nil
		}
	}
	w, watchDone, ok := g.watchWrite(w, r, id, target, next)
	if !ok {
		return nil
	}
	tw, tenantDone, err := g.toTenant(w, r, target, id.ProjectID)
	if err != nil {
		fhir.WriteOutcome(w, http.StatusBadRequest, err.Error())
		err = nil // answered; an authorization check still sees the answer
	} else {
		err = next(tw, r)
		tenantDone()
	}
	watchDone()
	if err != nil || finish == nil {
		return err
	}
	return finish()
}

// ownEndpoint returns the handler for one of fhirgate's own endpoints
// outside /oauth2/. These match the exact path only: anything else falls
// through to the FHIR base check, so a dotted path cannot masquerade as one
// of them.
func (g *Gateway) ownEndpoint(p string) http.HandlerFunc {
	o := g.o.OAuth
	switch p {
	case "/auth/exchange":
		return o.ServeLegacyExchange
	case "/.well-known/jwks.json":
		return o.ServeJWKS
	case "/.well-known/openid-configuration", "/.well-known/oauth-authorization-server":
		return o.ServeMetadata
	case "/.well-known/smart-configuration", g.o.FHIRBase + "/.well-known/smart-configuration":
		// SMART apps look below the FHIR base; the backend's own document
		// would describe another authorization server.
		return o.ServeSMARTConfiguration
	}
	return nil
}

// anyUnder tells whether any of the readings is under base.
func anyUnder(views []string, base string) bool {
	for _, v := range views {
		if under(v, base) {
			return true
		}
	}
	return false
}

// allPublic tells whether every reading is a public path.
func (g *Gateway) allPublic(views []string) bool {
	for _, v := range views {
		if !g.isPublic(v) {
			return false
		}
	}
	return true
}

func (g *Gateway) isPublic(norm string) bool {
	if !under(norm, g.base) {
		return false
	}
	return matchesAny(strings.TrimPrefix(norm, g.base), g.public)
}

// setIdentity hands the caller's identity to the backend.
func (g *Gateway) setIdentity(r *http.Request, id *oauth.Identity) {
	h := g.o.Headers
	r.Header.Set(h.User, id.UserID)
	r.Header.Set(h.Profile, id.Profile)
	r.Header.Set(h.Project, id.ProjectID)
	r.Header.Set(h.Client, id.ClientID)
	r.Header.Set(h.Scope, id.Scope)
	g.applyUpstreamAuth(r)
}

func (g *Gateway) applyUpstreamAuth(r *http.Request) {
	switch g.o.UpstreamAuth {
	case UpstreamStrip:
		r.Header.Del("Authorization")
	case UpstreamBearer:
		r.Header.Set("Authorization", "Bearer "+g.o.UpstreamToken)
	}
}

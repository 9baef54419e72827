package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/session"
	"github.com/fhirgate/fhirgate/internal/subscription"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler is the fhirgate middleware. On its site it answers fhirgate's own
// endpoints (every path under `/oauth2/`: `token`, `revoke`, `introspect`,
// `logout`, `userinfo`, any other with 404; `/auth/exchange`, `/auth/me`,
// `/.well-known/jwks.json`, `/.well-known/openid-configuration`,
// `/.well-known/oauth-authorization-server`, and
// `/.well-known/smart-configuration` both at the root and below
// `fhir_base`), and requires a valid fhirgate bearer token (or, with
// `basic_auth on`, a client's Basic credentials) for every request under
// `fhir_base` before passing it on to the next handler, normally
// `reverse_proxy`. Outside `fhir_base`, requests pass through without a
// fhirgate token (see `token_passthrough`).
//
// A request under `fhir_base` without a valid token is answered 401 with an
// RFC 6750 `WWW-Authenticate: Bearer realm="fhirgate"` challenge and a FHIR
// OperationOutcome body; the backend never sees it. The handler writes
// that answer itself (as every answer of its own) and returns no error, so
// a site's `handle_errors` does not see it. Only `public_paths` requested
// with one of `public_methods` pass without a token. Requests outside
// `fhir_base` pass through.
//
// Every authenticated request under `fhir_base` is then authorized
// against the token's SMART scopes (docs/authorization.md): the
// interaction, every resource type it reaches (`_include`, `_revinclude`,
// `_has`, chains, batch entries), the granular parameters and, for a
// patient context, the patient's compartment. A request the scopes do not
// allow is answered 403 with an OperationOutcome naming the missing
// permission, and the backend never sees it; so is an `$operation` that
// is neither built in nor listed in `allow_operations`.
//
// Headers that make backends act on another URL or method
// (`X-Original-URL`, `X-Rewrite-URL`, `X-HTTP-Method-Override`,
// `X-HTTP-Method`, `X-Method-Override`, in any case and with `_` for `-`)
// are removed from every request, and a request under `fhir_base` with a
// `_method` query parameter is answered 400.
//
// On success the identity goes to the backend in headers (incoming copies
// are always removed, so clients cannot spoof them) and to Caddy in these
// placeholders, following caddyauth's convention so access logs record the
// user:
//
// Placeholder | Value
// ------------|------
// `{http.auth.user.id}` | User id
// `{http.auth.user.profile}` | profile reference, e.g. `Practitioner/123`
// `{http.auth.user.project}` | project id
// `{http.auth.user.client_id}` | client id
// `{http.auth.user.scope}` | granted scope
type Handler struct {
	// FHIRBase is the path prefix of the FHIR API the gate protects.
	// Default: `/fhir/R4`.
	FHIRBase string `json:"fhir_base,omitempty"`

	// PublicPaths, relative to `fhir_base`, pass without a token. A path
	// ending in `/*` covers everything below it. Default: `/metadata` and
	// `/.well-known/smart-configuration`, which FHIR servers serve
	// publicly. An empty list makes nothing public.
	PublicPaths *[]string `json:"public_paths,omitempty"`

	// PublicMethods are the request methods a public path serves without a
	// token; a request with any other method needs a valid token like any
	// request under `fhir_base` (401 without one). Names are matched
	// exactly, so each must be an upper-case method name such as `GET`.
	// Default (also for an empty list): `GET`, `HEAD` and `OPTIONS`.
	PublicMethods []string `json:"public_methods,omitempty"`

	// PublicUpstreamAuth applies `upstream_auth` to requests served without
	// a token too: with `upstream_auth bearer`, an anonymous request on a
	// public path then reaches the backend carrying `upstream_token`. By
	// default (false) such a request reaches the backend with no
	// `Authorization` header, so anonymous callers never borrow the
	// gateway's backend credential.
	PublicUpstreamAuth bool `json:"public_upstream_auth,omitempty"`

	// UpstreamAuth says what the backend receives in `Authorization`:
	// `strip` (default) removes it, so the backend relies on the identity
	// headers; `passthrough` forwards the caller's fhirgate token;
	// `bearer` sends `upstream_token` instead.
	UpstreamAuth string `json:"upstream_auth,omitempty"`

	// UpstreamToken is the backend credential sent with `upstream_auth
	// bearer`. Use a placeholder such as `{env.BACKEND_TOKEN}` rather than a
	// literal: Caddy saves the running config to disk.
	UpstreamToken string `json:"upstream_token,omitempty"`

	// IdentityHeaders name the headers that carry the caller's identity to
	// the backend. Defaults: `X-Fhirgate-User`, `X-Fhirgate-Profile`,
	// `X-Fhirgate-Project`, `X-Fhirgate-Client`, `X-Fhirgate-Scope`.
	IdentityHeaders *IdentityHeaders `json:"identity_headers,omitempty"`

	// BasicAuth, when true (Caddyfile `basic_auth on`), accepts
	// `Authorization: Basic base64(client_id:secret)` wherever a bearer
	// token is accepted, as that client's own credentials (Medplum's Basic
	// authentication; the client needs a secret and a membership). The
	// identity of a Basic header is cached for as long as a bearer
	// token's sign-in. Default: false, Basic is refused with 401.
	BasicAuth bool `json:"basic_auth,omitempty"`

	// TokenPassthrough lists paths outside `fhir_base` served by services
	// that verify fhirgate's tokens themselves (through the published
	// JWKS); requests to them keep their fhirgate bearer token. On every
	// other path outside `fhir_base`, an `Authorization` header carrying a
	// fhirgate token is removed before the request goes on, so the site
	// never receives one unasked. A path ending in `/*` covers everything
	// below it. Default: none.
	TokenPassthrough []string `json:"token_passthrough,omitempty"`
	// BackendTenant is how a backend shared by several projects tells them
	// apart, for every authenticated request the handler sends on (bots'
	// `medplum` calls included): `none` (default) sends paths unchanged;
	// `path` sends `{fhir_base}/X` as `{fhir_base}/{project}/X`, the layout
	// of HAPI FHIR's URL-based partitioning, and maps
	// `{fhir_base}/{project}` back to `{fhir_base}` in the response's
	// `Location`, `Content-Location` and `Link` headers and textual bodies;
	// `header` sends the project id in `tenant_header`. With `path`, a path
	// that any backend could read as leaving the partition (encoded
	// slashes, dot segments, `;` parameters, backslashes, bytes outside
	// printable ASCII) is answered 400 and never sent. Requests served
	// without a token (`public_paths`) are sent unchanged.
	BackendTenant string `json:"backend_tenant,omitempty"`

	// TenantHeader names the header that carries the project id with
	// `backend_tenant header`; required then. Incoming copies of it are
	// always removed, so clients cannot choose their tenant.
	TenantHeader string `json:"tenant_header,omitempty"`

	// MaxBody bounds the body of a bot `$execute` request, in bytes; a
	// larger one is answered 413. Default: 1 MiB.
	MaxBody int64 `json:"max_body,omitempty"`

	// AllowOperations are FHIR `$operations` the gate lets through beyond
	// its built-in table (`$execute`, `$everything`, `$lastn`, `$expand`,
	// … see docs/authorization.md), by name with its `$`, each with the
	// SMART permissions it needs on the type of its path, e.g.
	// `{"$match": "s"}`; at the system level the permissions are needed
	// on every type (`*`). Any other operation is answered 403. Default:
	// none.
	AllowOperations map[string]string `json:"allow_operations,omitempty"`

	// Subscriptions, when true (Caddyfile `subscriptions on`), makes
	// `Subscription` under `fhir_base` fhirgate's, per project, managed by
	// project admins like `Bot` (the backend never sees those requests),
	// and runs them on the writes this handler passes: a matching create,
	// update or delete runs the subscribed bot, or POSTs to the webhook,
	// from the durable job queue. See docs/subscriptions.md. Default:
	// false, so a backend's own Subscriptions keep working.
	Subscriptions bool `json:"subscriptions,omitempty"`
	// SubscriptionDurability is what a subscribed write's answer waits
	// for: its trigger (the job that runs the write's Subscriptions)
	// committed to the queue. `deferred` (the default): committed, not
	// yet on disk — the trigger survives a crash of the gateway process,
	// and is synced to disk within about a tenth of a second (Badger) or within
	// about 3 × wal_writer_delay (PostgreSQL), so only a crash of the
	// machine or of PostgreSQL in that window can lose it. `sync`: on
	// disk, which adds a disk sync or WAL flush to each subscribed
	// write's answer. See docs/subscriptions.md "Delivery guarantees".
	SubscriptionDurability string `json:"subscription_durability,omitempty"`

	gw   *gateway.Gateway
	bots *botAPI
	subs *subscription.Service
	// subJobs are the store's subscription workers, which serve subs.
	subJobs *subscription.Jobs
	app     *App
	logger  *zap.Logger
	ctx     caddy.Context
	// route names the handler for the async jobs it accepts (routeName);
	// requestLess is its route for calls without a request.
	route       string
	requestLess *requestLess
}

// IdentityHeaders name the identity headers; an empty name keeps the default.
type IdentityHeaders struct {
	User    string `json:"user,omitempty"`
	Profile string `json:"profile,omitempty"`
	Project string `json:"project,omitempty"`
	Client  string `json:"client,omitempty"`
	Scope   string `json:"scope,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.fhirgate",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision sets up the handler over the fhirgate app (loaded with its
// defaults if the config has no `fhirgate` global option).
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	appVal, err := ctx.App("fhirgate")
	if err != nil {
		return fmt.Errorf("loading fhirgate app: %w", err)
	}
	app := appVal.(*App)
	h.app = app

	h.ctx, h.route, h.requestLess = ctx, routeName(h), new(requestLess)
	backends := func(ctx context.Context, id *oauth.Identity) (*gateway.Backend, error) {
		return h.gw.BackendFor(ctx, id)
	}
	h.bots, err = newBotAPI(app, h.logger, h.MaxBody, h.route, backends)
	if err != nil {
		return err
	}

	repl := caddy.NewReplacer()
	opts := gateway.Options{
		FHIRBase:           h.FHIRBase,
		PublicPaths:        derefPaths(h.PublicPaths),
		PublicMethods:      h.PublicMethods,
		PublicUpstreamAuth: h.PublicUpstreamAuth,
		UpstreamAuth:       h.UpstreamAuth,
		UpstreamToken:      repl.ReplaceKnown(h.UpstreamToken, ""),
		BasicAuth:          h.BasicAuth,
		TokenPassthrough:   h.TokenPassthrough,
		BackendTenant:      h.BackendTenant,
		TenantHeader:       h.TenantHeader,
		OAuth:              app.oauth,
		Operations:         h.bots.Handler,
		SiteOperations:     h.bots.SiteHandler,
		Me:                 (&session.Handler{Store: app.Store(), Logger: h.logger}).Serve,
		ErrorStatus:        errorStatus,
		OnAuthenticated:    setPlaceholders,
		AllowedOperations:  h.AllowOperations,
		Dispatch:           h.dispatch,
	}
	if h.Subscriptions {
		if err := h.provisionSubscriptions(app, &opts); err != nil {
			return err
		}
	}
	if hd := h.IdentityHeaders; hd != nil {
		opts.Headers = gateway.IdentityHeaders{
			User: hd.User, Profile: hd.Profile, Project: hd.Project, Client: hd.Client, Scope: hd.Scope,
		}
	}
	h.gw, err = gateway.New(opts)
	if err != nil {
		return err
	}
	app.addHandler(h)
	if h.PublicUpstreamAuth && h.UpstreamAuth == gateway.UpstreamBearer {
		for _, m := range h.PublicMethods {
			if !slices.Contains(gateway.DefaultPublicMethods, m) {
				h.logger.Warn("public paths accept anonymous writes with the backend credential",
					zap.String("method", m), zap.Strings("public_paths", derefPaths(h.PublicPaths)))
			}
		}
	}
	return nil
}

// Cleanup lets the bot runs of this config go on (a reload) or ends them
// within bot_shutdown_grace (Caddy is exiting), then writes the audit
// events still queued; the handler's use of the store ends after that.
func (h *Handler) Cleanup() error {
	// Caddy also cleans up a handler whose Provision failed part way.
	if h.subs != nil {
		h.subJobs.Release(h.subs)
	}
	if h.bots != nil {
		h.bots.cleanup(caddy.Exiting())
	}
	return nil
}

// ServeHTTP answers fhirgate's endpoints and gates the FHIR API. A request
// that arrives before the fhirgate app of its config has written the
// declared records (Caddy may start the HTTP server first) waits for them;
// if that load fails it is answered 503.
func (h Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if err := h.app.awaitDeclared(r.Context()); err != nil {
		h.logger.Warn("request refused: configuration not loaded", zap.Error(err))
		fhir.WriteOutcome(w, http.StatusServiceUnavailable, "the gateway configuration is not loaded")
		return nil
	}
	return h.gw.Serve(w, r, next.ServeHTTP)
}

// derefPaths keeps "not configured" (nil: the defaults) apart from "an
// empty list" (nothing public); a plain slice with omitempty would lose
// the difference on its way through JSON.
func derefPaths(p *[]string) []string {
	if p == nil {
		return nil
	}
	if *p == nil {
		return []string{}
	}
	return *p
}

// errorStatus reads the status of an error a later handler returned, such
// as reverse_proxy's 502 when the backend is down.
func errorStatus(err error) int {
	var he caddyhttp.HandlerError
	if errors.As(err, &he) {
		if he.StatusCode == 0 {
			return http.StatusInternalServerError
		}
		return he.StatusCode
	}
	return 0
}

// setPlaceholders publishes the caller's identity to later handlers and the
// access log.
func setPlaceholders(r *http.Request, id *oauth.Identity) {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return
	}
	repl.Set("http.auth.user.id", id.UserID)
	repl.Set("http.auth.user.profile", id.Profile)
	repl.Set("http.auth.user.project", id.ProjectID)
	repl.Set("http.auth.user.client_id", id.ClientID)
	repl.Set("http.auth.user.scope", id.Scope)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)

package caddymodule

import (
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
)

// parseHandlerDirective sets up the fhirgate handler from a site block.
func parseHandlerDirective(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	handler := new(Handler)
	err := handler.UnmarshalCaddyfile(h.Dispenser)
	return handler, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Paths are
// subdirectives because a first argument starting with / would be read as a
// request matcher. Syntax:
//
//	fhirgate {
//		fhir_base        <path>
//		public_paths     <path>...
//		public_methods   <method>...
//		upstream_auth    strip|passthrough|bearer <token>
//		public_upstream_auth
//		basic_auth       on|off
//		subscriptions    on|off
//		subscription_durability deferred|sync
//		token_passthrough <path>...
//		backend_tenant   none|path|header <header>
//		max_body         <size>
//		allow_operation  <$name> <permissions>
//		identity_headers {
//			user    <header>
//			profile <header>
//			project <header>
//			client  <header>
//			scope   <header>
//		}
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "fhir_base":
			if h.FHIRBase != "" {
				return d.Err("fhir_base already specified")
			}
			if !d.AllArgs(&h.FHIRBase) {
				return d.ArgErr()
			}
			if !strings.HasPrefix(h.FHIRBase, "/") {
				return d.Errf("invalid fhir_base '%s': must start with /", h.FHIRBase)
			}
		case "public_paths":
			if h.PublicPaths != nil {
				return d.Err("public_paths already specified")
			}
			paths := d.RemainingArgs()
			if paths == nil {
				paths = []string{} // "public_paths" alone: nothing is public
			}
			h.PublicPaths = &paths
		case "public_methods":
			if h.PublicMethods != nil {
				return d.Err("public_methods already specified")
			}
			h.PublicMethods = d.RemainingArgs()
			if len(h.PublicMethods) == 0 {
				return d.ArgErr()
			}
		case "public_upstream_auth":
			if h.PublicUpstreamAuth {
				return d.Err("public_upstream_auth already specified")
			}
			if err := flag(d, &h.PublicUpstreamAuth); err != nil {
				return err
			}
		case "upstream_auth":
			if h.UpstreamAuth != "" {
				return d.Err("upstream_auth already specified")
			}
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			h.UpstreamAuth = args[0]
			switch {
			case h.UpstreamAuth == "bearer" && len(args) == 2:
				h.UpstreamToken = args[1]
			case (h.UpstreamAuth == "strip" || h.UpstreamAuth == "passthrough") && len(args) == 1:
			case h.UpstreamAuth == "bearer" || h.UpstreamAuth == "strip" || h.UpstreamAuth == "passthrough":
				return d.ArgErr()
			default:
				return d.Errf("invalid upstream_auth '%s': must be strip, passthrough or bearer <token>", h.UpstreamAuth)
			}
		case "basic_auth":
			if err := onOff(d, &h.BasicAuth); err != nil {
				return err
			}
		case "subscriptions":
			if err := onOff(d, &h.Subscriptions); err != nil {
				return err
			}
		case "subscription_durability":
			var arg string
			if !d.AllArgs(&arg) {
				return d.ArgErr()
			}
			if err := checkSubscriptionDurability(arg); err != nil {
				return d.Err(err.Error())
			}
			h.SubscriptionDurability = arg
		case "token_passthrough":
			if h.TokenPassthrough != nil {
				return d.Err("token_passthrough already specified")
			}
			h.TokenPassthrough = d.RemainingArgs()
			if len(h.TokenPassthrough) == 0 {
				return d.ArgErr()
			}
		case "backend_tenant":
			if h.BackendTenant != "" {
				return d.Err("backend_tenant already specified")
			}
			args := d.RemainingArgs()
			if len(args) == 0 || len(args) > 2 {
				return d.ArgErr()
			}
			h.BackendTenant = args[0]
			switch mode := args[0]; {
			case mode == "header" && len(args) == 2:
				h.TenantHeader = args[1]
			case (mode == "none" || mode == "path") && len(args) == 1:
			case mode == "header":
				return d.Err("backend_tenant header needs a header name: backend_tenant header <Header-Name>")
			case mode == "none" || mode == "path":
				return d.ArgErr()
			default:
				return d.Errf("invalid backend_tenant '%s': must be none, path or header <Header-Name>", mode)
			}
		case "identity_headers":
			if err := h.unmarshalIdentityHeaders(d); err != nil {
				return err
			}
		case "max_body":
			if h.MaxBody != 0 {
				return d.Err("max_body already specified")
			}
			var arg string
			if !d.AllArgs(&arg) {
				return d.ArgErr()
			}
			size, err := humanize.ParseBytes(arg)
			if err != nil || size == 0 || size > 1<<40 {
				return d.Errf("invalid max_body '%s': want a size such as 1MB or 512KiB", arg)
			}
			h.MaxBody = int64(size)
		case "allow_operation":
			if err := h.unmarshalAllowOperation(d); err != nil {
				return err
			}
		default:
			return d.Errf("unrecognized fhirgate subdirective '%s'", d.Val())
		}
	}
	return nil
}

// unmarshalAllowOperation reads one `allow_operation <$name> <permissions>`.
// The permission letters are checked at provision, with the rest of the
// authorization config.
func (h *Handler) unmarshalAllowOperation(d *caddyfile.Dispenser) error {
	var name, perms string
	if !d.AllArgs(&name, &perms) {
		return d.ArgErr()
	}
	if !strings.HasPrefix(name, "$") {
		return d.Errf("invalid allow_operation '%s': the name starts with $", name)
	}
	if _, dup := h.AllowOperations[name]; dup {
		return d.Errf("allow_operation '%s' already specified", name)
	}
	if h.AllowOperations == nil {
		h.AllowOperations = map[string]string{}
	}
	h.AllowOperations[name] = perms
	return nil
}

func (h *Handler) unmarshalIdentityHeaders(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if h.IdentityHeaders == nil {
		h.IdentityHeaders = new(IdentityHeaders)
	}
	hd := h.IdentityHeaders
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var dst *string
		switch d.Val() {
		case "user":
			dst = &hd.User
		case "profile":
			dst = &hd.Profile
		case "project":
			dst = &hd.Project
		case "client":
			dst = &hd.Client
		case "scope":
			dst = &hd.Scope
		default:
			return d.Errf("unrecognized identity header '%s'", d.Val())
		}
		if !d.AllArgs(dst) {
			return d.ArgErr()
		}
	}
	return nil
}

// Interface guards
var _ caddyfile.Unmarshaler = (*Handler)(nil)

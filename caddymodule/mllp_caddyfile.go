package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// UnmarshalCaddyfile sets up the MLLP handler from its block inside a
// layer4 route; the syntax is in MLLP's doc comment.
func (h *MLLP) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the handler's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		var err error
		switch d.Val() {
		case "project":
			err = parseOneString(d, &h.Project)
		case "bot":
			err = parseOneString(d, &h.Bot)
		case "route":
			err = h.parseRoute(d)
		case "max_message":
			err = parseSize(d, &h.MaxMessage, 64<<20)
		case "idle_timeout":
			err = parseDuration(d, &h.IdleTimeout)
		case "max_concurrent":
			err = parsePositiveInt(d, &h.MaxConcurrent)
		case "duplicate_window":
			err = parseDurationOrOff(d, &h.DuplicateWindow)
		default:
			return d.Errf("unrecognized fhirgate_mllp option '%s'", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parseRoute reads one `route { … }` block.
func (h *MLLP) parseRoute(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	var r MLLPRoute
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "sending_application":
			err = parseOneString(d, &r.SendingApplication)
		case "sending_facility":
			err = parseOneString(d, &r.SendingFacility)
		case "receiving_application":
			err = parseOneString(d, &r.ReceivingApplication)
		case "receiving_facility":
			err = parseOneString(d, &r.ReceivingFacility)
		case "bot":
			err = parseOneString(d, &r.Bot)
		default:
			return d.Errf("unrecognized fhirgate_mllp route option '%s'", d.Val())
		}
		if err != nil {
			return err
		}
	}
	if r.Bot == "" {
		return d.Err("a fhirgate_mllp route needs a bot")
	}
	h.Routes = append(h.Routes, r)
	return nil
}

// parseOneString is oneArg refusing a repeat of the option.
func parseOneString(d *caddyfile.Dispenser, dst *string) error {
	if *dst != "" {
		return d.Errf("%s already specified", d.Val())
	}
	return oneArg(d, dst)
}

// parseDurationOrOff reads a positive duration, or `off` (stored as -1ns).
func parseDurationOrOff(d *caddyfile.Dispenser, dst *caddy.Duration) error {
	if *dst != 0 {
		return d.Errf("%s already specified", d.Val())
	}
	if d.CountRemainingArgs() == 1 && d.NextArg() {
		if d.Val() == "off" {
			*dst = -1
			return nil
		}
		d.Prev()
	}
	return parseDuration(d, dst)
}

// Interface guard
var _ caddyfile.Unmarshaler = (*MLLP)(nil)

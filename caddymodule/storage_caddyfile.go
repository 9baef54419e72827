package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// parseStorage reads `storage <name> { … }` inside the fhirgate global
// option into a.StorageRaw, the module's JSON with its name as `module`.
func (a *App) parseStorage(d *caddyfile.Dispenser) error {
	if a.StorageRaw != nil {
		return d.Err("storage already specified")
	}
	if a.StorageDir != "" {
		return d.Err("storage and storage_dir both set: storage_dir is short for `storage badger { dir … }`; keep one")
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	name := d.Val()
	modID := "fhirgate.storage." + name
	if _, err := caddy.GetModule(modID); err != nil {
		return d.Errf("unknown storage '%s': want badger or postgres", name)
	}
	unm, err := caddyfile.UnmarshalModule(d, modID)
	if err != nil {
		return err
	}
	a.StorageRaw = caddyconfig.JSONModuleObject(unm, "module", name, nil)
	return nil
}

// UnmarshalCaddyfile reads the `storage badger` block (see BadgerStorage).
func (s *BadgerStorage) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the module name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "dir":
			if s.Dir != "" {
				return d.Err("dir already specified")
			}
			if !d.AllArgs(&s.Dir) {
				return d.ArgErr()
			}
		default:
			return d.Errf("unrecognized storage badger option '%s'", d.Val())
		}
	}
	return nil
}

// UnmarshalCaddyfile reads the `storage postgres` block (see
// PostgresStorage).
func (s *PostgresStorage) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the module name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "dsn":
			if s.DSN != "" {
				return d.Err("dsn already specified")
			}
			if !d.AllArgs(&s.DSN) {
				return d.ArgErr()
			}
		case "max_conns":
			if err := parsePositiveInt(d, &s.MaxConns); err != nil {
				return err
			}
		case "timeout":
			if err := parseDuration(d, &s.Timeout); err != nil {
				return err
			}
		default:
			return d.Errf("unrecognized storage postgres option '%s'", d.Val())
		}
	}
	if s.DSN == "" {
		return d.Err("storage postgres needs a dsn, e.g. dsn {env.FHIRGATE_POSTGRES_DSN}")
	}
	return nil
}

// Interface guards
var (
	_ caddyfile.Unmarshaler = (*BadgerStorage)(nil)
	_ caddyfile.Unmarshaler = (*PostgresStorage)(nil)
)

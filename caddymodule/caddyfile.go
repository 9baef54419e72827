package caddymodule

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("fhirgate", parseGlobalOption)
	httpcaddyfile.RegisterHandlerDirective("fhirgate", parseHandlerDirective)
	// With the authentication directives, not merely before reverse_proxy:
	// "before reverse_proxy" sorts after handle and route, and a request
	// answered inside a user's handle block would then skip the gate.
	httpcaddyfile.RegisterDirectiveOrder("fhirgate", httpcaddyfile.Before, "basic_auth")
}

// parseGlobalOption sets up the fhirgate app from the global option. Several
// `fhirgate` blocks are merged. Syntax:
//
//	fhirgate {
//		storage badger {
//			dir <path>
//		}
//		storage postgres {
//			dsn       <dsn>
//			max_conns <n>
//			timeout   <duration>
//		}
//		storage_dir        <path>
//		issuer             <url>
//		access_token_ttl   <duration>
//		allow_short_access_tokens
//		refresh_token_ttl  <duration>
//		userinfo_timeout   <duration>
//		userinfo_cache_ttl <duration>
//		bot_timeout        <duration>
//		bot_max_concurrent <n>
//		bot_project_max_concurrent <n>|off
//		bot_queue_timeout  <duration>
//		bot_shutdown_grace <duration>
//		bot_max_timeout    <duration>
//		bot_isolation      process|inprocess
//		bot_default_runtime awslambda|vmcontext
//		bot_memory         <size>
//		bot_worker_memory  <size>
//		bot_runs_per_worker <n>
//		bot_compile_timeout <duration>
//		audit_retention    <duration>
//		bot_max_calls_per_request <n>
//		bot_async_result_max      <size>
//		project_bot_records_max   <size>
//		bot_records_disk_reserve  <size>
//		email {
//			smtp       <host:port>
//			username   <user>
//			password   <password>
//			from       <address>
//			tls        mandatory|opportunistic|implicit|off
//			timeout    <duration>
//			rate_limit <n> [<period>]
//		}
//		project <id> {
//			name <display name>
//			email_senders <address>...
//			client <client_id> {
//				userinfo_url <url>
//				idp_jwks_uri <url>
//				idp_issuer   <iss>
//				idp_audience <aud>...
//				use_subject
//				allow_unverified_email
//				secret            <secret>
//				retiring_secret   <secret>
//				jwks_uri          <url>
//				admin
//				timeout           <duration>
//				cache_ttl         <duration>
//				access_token_ttl  <duration>
//				refresh_token_ttl <duration>
//				scope             <scope>...
//			}
//			user <email> {
//				profile <ResourceType/id>
//				external_id <sub>
//				admin
//			}
//			bot <name> {
//				identifier <system|value>...
//				source <file>
//				audit_event_trigger always|never|on-error|on-output
//				runtime_version awslambda|vmcontext
//				scope <scope>...
//				cron <minute> <hour> <day-of-month> <month> <day-of-week>
//				run_as_user [true|false]
//			}
//			egress {
//				allow         <host[:port]>...
//				allow_http    <host[:port]>...
//				allow_private <address|cidr>...
//			}
//		}
//	}
func parseGlobalOption(d *caddyfile.Dispenser, existingVal any) (any, error) {
	app := new(App)
	if existing, ok := existingVal.(httpcaddyfile.App); ok {
		if err := json.Unmarshal(existing.Value, app); err != nil {
			return nil, fmt.Errorf("merging fhirgate options: %w", err)
		}
	}
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "fhirgate", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile sets up the app from Caddyfile tokens (see
// parseGlobalOption for the syntax).
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "storage":
			if err := a.parseStorage(d); err != nil {
				return err
			}
		case "storage_dir":
			if a.StorageDir != "" {
				return d.Err("storage_dir already specified")
			}
			if a.StorageRaw != nil {
				return d.Err("storage and storage_dir both set: storage_dir is short for `storage badger { dir … }`; keep one")
			}
			if !d.AllArgs(&a.StorageDir) {
				return d.ArgErr()
			}
		case "issuer":
			if a.Issuer != "" {
				return d.Err("issuer already specified")
			}
			if !d.AllArgs(&a.Issuer) {
				return d.ArgErr()
			}
		case "access_token_ttl":
			if err := parseDuration(d, &a.AccessTokenTTL); err != nil {
				return err
			}
		case "allow_short_access_tokens":
			if a.AllowShortAccessTokens {
				return d.Err("allow_short_access_tokens already specified")
			}
			if err := flag(d, &a.AllowShortAccessTokens); err != nil {
				return err
			}
		case "refresh_token_ttl":
			if err := parseDuration(d, &a.RefreshTokenTTL); err != nil {
				return err
			}
		case "userinfo_timeout":
			if err := parseDuration(d, &a.UserinfoTimeout); err != nil {
				return err
			}
		case "userinfo_cache_ttl":
			if err := parseDuration(d, &a.UserinfoCacheTTL); err != nil {
				return err
			}
		case "bot_timeout":
			if err := parseDuration(d, &a.BotTimeout); err != nil {
				return err
			}
		case "bot_queue_timeout":
			if err := parseDuration(d, &a.BotQueueTimeout); err != nil {
				return err
			}
		case "bot_shutdown_grace":
			if err := parseDuration(d, &a.BotShutdownGrace); err != nil {
				return err
			}
		case "bot_compile_timeout":
			if err := parseDuration(d, &a.BotCompileTimeout); err != nil {
				return err
			}
		case "bot_max_timeout":
			if err := parseDuration(d, &a.BotMaxTimeout); err != nil {
				return err
			}
		case "audit_retention":
			if err := parseDuration(d, &a.AuditRetention); err != nil {
				return err
			}
		case "bot_max_concurrent":
			if err := parsePositiveInt(d, &a.BotMaxConcurrent); err != nil {
				return err
			}
		case "bot_project_max_concurrent":
			if err := parsePositiveIntOrOff(d, &a.BotProjectMaxConcurrent); err != nil {
				return err
			}
		case "bot_isolation":
			if a.BotIsolation != "" {
				return d.Err("bot_isolation already specified")
			}
			if !d.AllArgs(&a.BotIsolation) {
				return d.ArgErr()
			}
			if err := checkBotIsolation(a.BotIsolation); err != nil {
				return d.WrapErr(err)
			}
		case "bot_default_runtime":
			if a.BotDefaultRuntime != "" {
				return d.Err("bot_default_runtime already specified")
			}
			if !d.AllArgs(&a.BotDefaultRuntime) {
				return d.ArgErr()
			}
			if err := checkBotRuntime("bot_default_runtime", a.BotDefaultRuntime); err != nil {
				return d.WrapErr(err)
			}
		case "bot_worker_memory":
			if err := parseSize(d, &a.BotWorkerMemory, 1<<40); err != nil {
				return err
			}
		case "bot_memory":
			if err := parseSize(d, &a.BotMemory, 1<<40); err != nil {
				return err
			}
		case "bot_runs_per_worker":
			if err := parsePositiveInt(d, &a.BotRunsPerWorker); err != nil {
				return err
			}
		case "bot_max_calls_per_request":
			if err := parsePositiveInt(d, &a.BotMaxCallsPerRequest); err != nil {
				return err
			}
		case "bot_async_result_max":
			if err := parseSize(d, &a.BotAsyncResultMax, 1<<30); err != nil {
				return err
			}
		case "project_bot_records_max":
			if err := parseSize(d, &a.ProjectBotRecordsMax, 1<<50); err != nil {
				return err
			}
		case "bot_records_disk_reserve":
			if err := parseSize(d, &a.BotRecordsDiskReserve, 1<<50); err != nil {
				return err
			}
		case "project":
			if err := a.unmarshalProject(d); err != nil {
				return err
			}
		case "email":
			if err := a.unmarshalEmail(d); err != nil {
				return err
			}
		default:
			return d.Errf("unrecognized fhirgate option '%s'", d.Val())
		}
	}
	return nil
}

func (a *App) unmarshalProject(d *caddyfile.Dispenser) error {
	return namedBlock(d, &a.Projects, "project '%s' already declared", func(p *ProjectConfig) error {
		switch d.Val() {
		case "name":
			return oneArg(d, &p.Name)
		case "client":
			return p.unmarshalClient(d)
		case "user":
			return p.unmarshalUser(d)
		case "bot":
			return p.unmarshalBot(d)
		case "egress":
			return p.unmarshalEgress(d)
		case "email_senders":
			return moreArgs(d, &p.EmailSenders)
		default:
			return d.Errf("unrecognized project option '%s'", d.Val())
		}
	})
}

func (p *ProjectConfig) unmarshalClient(d *caddyfile.Dispenser) error {
	return namedBlock(d, &p.Clients, "client '%s' already declared in this project", func(c *ClientConfig) error {
		switch d.Val() {
		case "userinfo_url":
			return oneArg(d, &c.UserinfoURL)
		case "idp_jwks_uri":
			return oneArg(d, &c.IdPJWKSURI)
		case "idp_issuer":
			return oneArg(d, &c.IdPIssuer)
		case "idp_audience":
			return moreArgs(d, &c.IdPAudience)
		case "use_subject":
			return flag(d, &c.UseSubject)
		case "allow_unverified_email":
			return flag(d, &c.AllowUnverifiedEmail)
		case "secret":
			return oneArg(d, &c.Secret)
		case "retiring_secret":
			return oneArg(d, &c.RetiringSecret)
		case "jwks_uri":
			return oneArg(d, &c.JWKSURI)
		case "admin":
			return flag(d, &c.Admin)
		case "timeout":
			return parseDuration(d, &c.Timeout)
		case "cache_ttl":
			return parseDuration(d, &c.CacheTTL)
		case "access_token_ttl":
			return parseDuration(d, &c.AccessTokenTTL)
		case "refresh_token_ttl":
			return parseDuration(d, &c.RefreshTokenTTL)
		case "scope":
			if c.Scope != "" {
				return d.Err("scope already specified")
			}
			scopes := d.RemainingArgs()
			if len(scopes) == 0 {
				return d.ArgErr()
			}
			c.Scope = strings.Join(scopes, " ")
			return nil
		default:
			return d.Errf("unrecognized client option '%s'", d.Val())
		}
	})
}

func (p *ProjectConfig) unmarshalUser(d *caddyfile.Dispenser) error {
	return namedBlock(d, &p.Users, "user '%s' already declared in this project", func(u *UserConfig) error {
		switch d.Val() {
		case "profile":
			return oneArg(d, &u.Profile)
		case "external_id":
			return oneArg(d, &u.ExternalID)
		case "admin":
			return flag(d, &u.Admin)
		default:
			return d.Errf("unrecognized user option '%s'", d.Val())
		}
	})
}

func (p *ProjectConfig) unmarshalBot(d *caddyfile.Dispenser) error {
	return namedBlock(d, &p.Bots, "bot '%s' already declared in this project", func(b *BotConfig) error {
		switch d.Val() {
		case "identifier":
			return moreArgs(d, &b.Identifiers)
		case "source":
			var src string
			if err := oneArg(d, &src); err != nil {
				return err
			}
			b.Source = relativeToCaddyfile(d, src)
			return nil
		case "audit_event_trigger":
			if err := oneArg(d, &b.AuditEventTrigger); err != nil {
				return err
			}
			if b.AuditEventTrigger == "" {
				return d.ArgErr()
			}
			if err := checkAuditEventTrigger(b.AuditEventTrigger); err != nil {
				return d.WrapErr(err)
			}
			return nil
		case "runtime_version":
			if err := oneArg(d, &b.RuntimeVersion); err != nil {
				return err
			}
			if b.RuntimeVersion == "" {
				return d.ArgErr()
			}
			if err := checkBotRuntime("runtime_version", b.RuntimeVersion); err != nil {
				return d.WrapErr(err)
			}
			return nil
		case "scope":
			return joinedArgs(d, &b.Scope, checkBotScope)
		case "cron":
			return joinedArgs(d, &b.Cron, checkBotCron)
		case "run_as_user":
			return optionalBool(d, &b.RunAsUser)
		default:
			return d.Errf("unrecognized bot option '%s'", d.Val())
		}
	})
}

// namedBlock reads `<kind> <name> { ... }` into (*m)[name], refusing a
// second block of the same name (dupFormat names it), and hands each line
// of the block to option.
func namedBlock[T any](d *caddyfile.Dispenser, m *map[string]*T, dupFormat string, option func(*T) error) error {
	var name string
	if !d.AllArgs(&name) {
		return d.ArgErr()
	}
	if _, dup := (*m)[name]; dup {
		return d.Errf(dupFormat, name)
	}
	v := new(T)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := option(v); err != nil {
			return err
		}
	}
	if *m == nil {
		*m = make(map[string]*T)
	}
	(*m)[name] = v
	return nil
}

// oneArg reads the line's single argument into dst.
func oneArg(d *caddyfile.Dispenser, dst *string) error {
	if !d.AllArgs(dst) {
		return d.ArgErr()
	}
	return nil
}

// moreArgs appends an option's one or more arguments to dst; the option
// may repeat.
func moreArgs(d *caddyfile.Dispenser, dst *[]string) error {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	*dst = append(*dst, args...)
	return nil
}

// joinedArgs reads an option's one or more arguments, joined by spaces,
// into dst (a scope, a cron expression), refusing a repeat and what check
// refuses, naming the line.
func joinedArgs(d *caddyfile.Dispenser, dst *string, check func(string) error) error {
	if *dst != "" {
		return d.Errf("%s already specified", d.Val())
	}
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	*dst = strings.Join(args, " ")
	if err := check(*dst); err != nil {
		return d.WrapErr(err)
	}
	return nil
}

// optionalBool sets a boolean option written alone (true) or with `true`
// or `false`, refusing a repeat.
func optionalBool(d *caddyfile.Dispenser, dst **bool) error {
	name := d.Val()
	if *dst != nil {
		return d.Errf("%s already specified", name)
	}
	v := true
	if d.NextArg() {
		arg := d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
		if arg != "true" && arg != "false" {
			return d.Errf("invalid %s '%s': want true or false", name, arg)
		}
		v = arg == "true"
	}
	*dst = &v
	return nil
}

// flag sets a boolean option that takes no argument.
func flag(d *caddyfile.Dispenser, dst *bool) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	*dst = true
	return nil
}

// onOff sets a boolean option written as `on` or `off`.
func onOff(d *caddyfile.Dispenser, dst *bool) error {
	name := d.Val()
	var arg string
	if !d.AllArgs(&arg) {
		return d.ArgErr()
	}
	if arg != "on" && arg != "off" {
		return d.Errf("invalid %s '%s': must be on or off", name, arg)
	}
	*dst = arg == "on"
	return nil
}

// parseDuration reads one duration argument into dst, refusing repeats.
func parseDuration(d *caddyfile.Dispenser, dst *caddy.Duration) error {
	if *dst != 0 {
		return d.Errf("%s already specified", d.Val())
	}
	name := d.Val()
	var arg string
	if !d.AllArgs(&arg) {
		return d.ArgErr()
	}
	dur, err := caddy.ParseDuration(arg)
	if err != nil {
		return d.Errf("invalid %s '%s': %v", name, arg, err)
	}
	if dur <= 0 && name != "userinfo_cache_ttl" && name != "cache_ttl" {
		return d.Errf("invalid %s '%s': must be positive", name, arg)
	}
	*dst = caddy.Duration(dur)
	return nil
}

// parsePositiveInt reads one positive integer argument into dst.
func parsePositiveInt(d *caddyfile.Dispenser, dst *int) error {
	if *dst != 0 {
		return d.Errf("%s already specified", d.Val())
	}
	name := d.Val()
	var arg string
	if !d.AllArgs(&arg) {
		return d.ArgErr()
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n <= 0 {
		return d.Errf("invalid %s '%s': must be a positive integer", name, arg)
	}
	*dst = n
	return nil
}

// parsePositiveIntOrOff reads one positive integer, or `off` (stored as -1),
// into dst.
func parsePositiveIntOrOff(d *caddyfile.Dispenser, dst *int) error {
	if *dst != 0 {
		return d.Errf("%s already specified", d.Val())
	}
	name := d.Val()
	var arg string
	if !d.AllArgs(&arg) {
		return d.ArgErr()
	}
	if arg == "off" {
		*dst = -1
		return nil
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n <= 0 {
		return d.Errf("invalid %s '%s': must be a positive integer or off", name, arg)
	}
	*dst = n
	return nil
}

// relativeToCaddyfile resolves a relative path against the directory of the
// Caddyfile the token came from (imports included), so a config works from
// any working directory.
func relativeToCaddyfile(d *caddyfile.Dispenser, path string) string {
	if filepath.IsAbs(path) || d.File() == "" {
		return path
	}
	abs, err := filepath.Abs(filepath.Join(filepath.Dir(d.File()), path))
	if err != nil {
		return path
	}
	return abs
}

// parseSize reads an option's one size argument (1MiB, 256MB, 4096) into
// dst, between 1 byte and limit.
func parseSize(d *caddyfile.Dispenser, dst *int64, limit uint64) error {
	name := d.Val()
	if *dst != 0 {
		return d.Errf("%s already specified", name)
	}
	var arg string
	if !d.AllArgs(&arg) {
		return d.ArgErr()
	}
	size, err := humanize.ParseBytes(arg)
	if err != nil || size == 0 || size > limit {
		return d.Errf("invalid %s '%s': want a size such as 1MiB or 256MB, at most %s", name, arg, humanize.IBytes(limit))
	}
	*dst = int64(size)
	return nil
}

// Interface guards
var (
	_ caddyfile.Unmarshaler = (*App)(nil)
)

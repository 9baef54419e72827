package caddymodule

import (
	"fmt"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/fhirgate/fhirgate/internal/authz"
	"github.com/fhirgate/fhirgate/internal/store"
)

// ProjectConfig declares a project and the records inside it. The map key
// under `projects` is the project's id.
type ProjectConfig struct {
	// Name is the project's display name. Default: the project id.
	Name string `json:"name,omitempty"`

	// Clients are ClientApplications keyed by client id: the `client_id`
	// your application sends to the token endpoint.
	Clients map[string]*ClientConfig `json:"clients,omitempty"`

	// Users are people who may sign in to this project, keyed by email
	// (compared case-insensitively). Each becomes a User (shared by all
	// projects) and a ProjectMembership in this project.
	Users map[string]*UserConfig `json:"users,omitempty"`

	// Bots are keyed by name, unique within the project.
	Bots map[string]*BotConfig `json:"bots,omitempty"`

	// Egress is the project's allow-list for webhooks and bots' `fetch`.
	// Without one, every outbound request is refused.
	Egress *EgressConfig `json:"egress,omitempty"`

	// EmailSenders are the addresses this project's bots may send email from, besides the
	// `email` block's default sender.
	EmailSenders []string `json:"email_senders,omitempty"`
}

// ClientConfig declares a ClientApplication: one that exchanges tokens of
// an external identity provider (`userinfo_url` or `idp_jwks_uri`), one that signs in as
// itself with `client_credentials` (`secret` or `jwks_uri`), or both.
type ClientConfig struct {
	// UserinfoURL is the identity provider's OpenID Connect userinfo
	// endpoint, called with the subject token during token exchange (for
	// a JWT subject token only when `idp_jwks_uri` is set and the verified
	// token lacks the claims the match needs). Token exchange needs it or
	// `idp_jwks_uri`; a client that only signs in as itself needs neither.
	UserinfoURL string `json:"userinfo_url,omitempty"`

	// IdPJWKSURI is the identity provider's key set (its discovery
	// document's `jwks_uri`). With it, a subject token that is a JWT is
	// verified here, by signature (RS*, PS*, ES*, EdDSA), `exp`/`nbf`,
	// `idp_issuer` and `idp_audience`, without a userinfo call, and ID
	// tokens are accepted as subject tokens. The keys are cached,
	// refetched after 10 minutes and on an unknown `kid` (at most every 30
	// seconds), and used for up to an hour while the provider cannot be
	// reached. (`jwks_uri` is the client's own keys, for machine sign-in.)
	IdPJWKSURI string `json:"idp_jwks_uri,omitempty"`

	// IdPIssuer is the `iss` a verified token must carry, exactly.
	// Required with `idp_jwks_uri`.
	IdPIssuer string `json:"idp_issuer,omitempty"`

	// IdPAudience lists the values of which a verified token's `aud` must
	// hold one: the API audience of access tokens, and the provider-side
	// client id of ID tokens. Required with `idp_jwks_uri`.
	IdPAudience []string `json:"idp_audience,omitempty"`

	// UseSubject matches people by the provider's `sub` claim against the
	// membership's external id, instead of by email.
	UseSubject bool `json:"use_subject,omitempty"`

	// AllowUnverifiedEmail matches people by an email the provider does
	// not vouch for: `email_verified` false or absent. Default: only
	// `email_verified: true` matches by email. Set it only for a provider
	// that lets no one choose an address they do not own.
	AllowUnverifiedEmail bool `json:"allow_unverified_email,omitempty"`

	// Secret makes this a confidential client: token requests must then
	// authenticate with it (HTTP Basic or `client_secret`). Use a
	// placeholder such as `{env.CLIENT_SECRET}`: Caddy saves the running
	// config to disk.
	Secret string `json:"secret,omitempty"`

	// RetiringSecret is the previous secret during a rotation: both are
	// accepted until it is removed. Rotate without downtime by moving the
	// old secret here, setting a new `secret`, updating the callers, then
	// removing this one.
	RetiringSecret string `json:"retiring_secret,omitempty"`

	// JWKSURI is the URL of the client's public keys (a JWK set). The
	// client then signs in with `client_credentials` and a signed client
	// assertion (`private_key_jwt`, RFC 7523) instead of a secret. The set
	// is cached for five minutes and fetched again when an assertion does
	// not verify (at most every 30 seconds).
	JWKSURI string `json:"jwks_uri,omitempty"`

	// Admin makes the client a project administrator when it signs in as
	// itself. A client with a `secret` or `jwks_uri` gets a membership in
	// the project (user and profile `ClientApplication/<id>`); it is an
	// administrator only with this option.
	Admin bool `json:"admin,omitempty"`

	// Timeout bounds this client's userinfo calls. Default: the app's
	// `userinfo_timeout`.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// CacheTTL is how long this client's userinfo answers are reused;
	// negative disables caching. Default: the app's `userinfo_cache_ttl`.
	CacheTTL caddy.Duration `json:"cache_ttl,omitempty"`

	// Scope is what this client may be granted: SMART scopes
	// (`patient/Observation.rs`, `user/*.cruds`, v1's `user/*.read`) and
	// `openid`, `fhirUser`, `offline_access`, `online_access`,
	// `launch/patient`, space-separated. A token request is granted the
	// scope it asks for intersected with this. Default (empty): full
	// access, `user/*.cruds`.
	Scope string `json:"scope,omitempty"`

	// AccessTokenTTL and RefreshTokenTTL override the app's token lifetimes
	// for this client.
	AccessTokenTTL  caddy.Duration `json:"access_token_ttl,omitempty"`
	RefreshTokenTTL caddy.Duration `json:"refresh_token_ttl,omitempty"`
}

// UserConfig declares a person and their membership in the project.
type UserConfig struct {
	// Profile is the FHIR resource that represents the person, such as
	// `Practitioner/123` or `Patient/456`. Required.
	Profile string `json:"profile,omitempty"`

	// ExternalID is the person's `sub` at the identity provider, matched
	// when a client uses `use_subject`.
	ExternalID string `json:"external_id,omitempty"`

	// Admin makes the person a project administrator.
	Admin bool `json:"admin,omitempty"`
}

// BotConfig declares a bot and its code.
type BotConfig struct {
	// Identifiers are `system|value` pairs by which `$execute?identifier=`
	// finds the bot. Each is unique within the project.
	Identifiers []string `json:"identifiers,omitempty"`

	// Source is the path of the bot's TypeScript or JavaScript file. A
	// relative path in a Caddyfile is relative to that Caddyfile; in JSON it
	// is relative to the working directory. Required.
	Source string `json:"source,omitempty"`

	// AuditEventTrigger says which runs leave an AuditEvent, as Medplum's
	// `Bot.auditEventTrigger` does: `always` (the default), `never`,
	// `on-error` (failed runs only) or `on-output` (runs that wrote to the
	// console). A busy feed that only needs its failures on record saves the
	// store write of every other run (15-32% of a trivial bot run's CPU in
	// fhirgate-bench scenario 3).
	AuditEventTrigger string `json:"audit_event_trigger,omitempty"`

	// RuntimeVersion is the bot's `runtimeVersion`: `awslambda` (a warm
	// instance whose module state may carry between runs) or `vmcontext`
	// (a fresh runtime per run). Empty: `bot_default_runtime`.
	RuntimeVersion string `json:"runtime_version,omitempty"`

	// Scope is what the bot may do when it runs as itself: SMART `user/`
	// or `system/` scopes, space-separated, in the grammar of a client's
	// `scope` (`user/Patient.rs user/Observation.c`). It is kept on the
	// bot's membership (a ProjectMembership whose user is `Bot/{id}`),
	// made when the bot has none; every call the bot makes as itself is
	// authorized against it. `patient/` scopes are refused (a bot has no
	// patient context). Default (empty): the project's full access — a
	// scope removed from the config is cleared from the membership at the
	// next load, as is one set through the admin API on a declared bot.
	Scope string `json:"scope,omitempty"`

	// Cron runs the bot on a schedule: a five-field cron expression
	// (minute hour day-of-month month day-of-week), evaluated in UTC, as
	// `Bot.cronString`. Each tick runs the bot as itself with the Bot as
	// `event.input`. Default (empty): no schedule; a schedule removed from
	// the config (or set through the FHIR API on a declared bot) is
	// removed at the next load, and a changed one applies from the next
	// tick.
	Cron string `json:"cron,omitempty"`

	// RunAsUser runs the bot as its caller instead of as itself, as
	// `Bot.runAsUser`: `true` makes its calls carry the caller's identity
	// and scopes; `false` makes it run as itself, with `scope`. Unset:
	// the store's value is kept — `false` for a bot the config creates,
	// `true` for one stored before bots ran as themselves. So removing the
	// option leaves the bot as it is; write `false` to turn it off.
	RunAsUser *bool `json:"run_as_user,omitempty"`
}

// checkBotRuntime refuses a runtime Medplum does not define, naming the
// config key.
func checkBotRuntime(key, v string) error {
	if v != "" && !slices.Contains(store.BotRuntimes, v) {
		return fmt.Errorf("invalid %s '%s': want one of %s", key, v, strings.Join(store.BotRuntimes, ", "))
	}
	return nil
}

// checkBotScope refuses a declared bot scope the SMART grammar refuses,
// one that grants nothing a bot can use (`patient/` scopes: a bot has no
// patient context), and one without any resource scope, which would mean
// the project's full access while looking narrow.
func checkBotScope(v string) error {
	if v == "" {
		return nil
	}
	set, err := authz.Parse(v)
	if err != nil {
		return err // "invalid scope: <token>: why"
	}
	for _, s := range set.Scopes {
		if s.Context == authz.ContextPatient {
			return fmt.Errorf("invalid scope '%s': a bot has no patient context, so patient/ scopes grant it nothing; use user/ or system/", v)
		}
	}
	if set.Full() {
		return fmt.Errorf("invalid scope '%s': it names no user/ or system/ resource scope, which would be the project's full access; leave scope out for that", v)
	}
	return nil
}

// checkBotCron refuses a schedule the store's cron parser refuses.
func checkBotCron(v string) error {
	if v == "" {
		return nil
	}
	if _, err := store.ParseCron(v); err != nil {
		return fmt.Errorf("invalid cron: %w", err)
	}
	return nil
}

// checkAuditEventTrigger refuses a trigger Medplum does not define, naming
// the config key (the store would name its own field).
func checkAuditEventTrigger(v string) error {
	if v != "" && !slices.Contains(store.AuditEventTriggers, v) {
		return fmt.Errorf("invalid audit_event_trigger '%s': want one of %s", v, strings.Join(store.AuditEventTriggers, ", "))
	}
	return nil
}

// checkBotIsolation refuses a bot_isolation other than the two there are,
// in the Caddyfile's words; Provision refuses it in JSON.
func checkBotIsolation(v string) error {
	if v != isolationProcess && v != isolationInProcess {
		return fmt.Errorf("invalid bot_isolation '%s': want %s or %s", v, isolationProcess, isolationInProcess)
	}
	return nil
}

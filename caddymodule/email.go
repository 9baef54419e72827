package caddymodule

import (
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/fhirgate/fhirgate/internal/email"
)

// EmailConfig is the SMTP server bots send email through (medplum.sendEmail). Without it,
// sendEmail fails saying no SMTP server is configured.
type EmailConfig struct {
	// SMTP is the SMTP server, as host:port (587 for STARTTLS submission, 465 with `tls implicit`).
	SMTP string `json:"smtp"`

	// Username and Password authenticate to the server (the strongest mechanism it offers over
	// TLS; PLAIN, to localhost only, with `tls off`). Both or neither. Use a placeholder such as
	// {env.SMTP_PASSWORD} to keep the password out of the config file.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`

	// From is the default sender: the address of an email whose bot gives none. Every project
	// may send from it; a project's `email_senders` are the other addresses its bots may use.
	From string `json:"from,omitempty"`

	// TLS is how the connection is protected: `mandatory` (STARTTLS required, the default),
	// `opportunistic` (STARTTLS when offered), `implicit` (TLS from the start, SMTPS) or `off`
	// (plain text, for a relay on a trusted network).
	TLS string `json:"tls,omitempty"`

	// Timeout bounds sending one email, connection included. Default: 15s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// RateLimit is how many emails each project may send per RatePeriod (counted by each
	// gateway process). Default: 100 per hour.
	RateLimit int `json:"rate_limit,omitempty"`

	// RatePeriod is the period of RateLimit. Default: 1h.
	RatePeriod caddy.Duration `json:"rate_period,omitempty"`
}

// emailSender builds the sender of a's email block, with each project's senders; nil without
// one.
func (a *App) emailSender() (*email.Sender, error) {
	if a.Email == nil {
		return nil, nil
	}
	senders := map[string][]string{}
	for id, p := range a.Projects {
		if len(p.EmailSenders) > 0 {
			senders[id] = p.EmailSenders
		}
	}
	return email.New(a.Email.config(senders))
}

func (c *EmailConfig) config(senders map[string][]string) email.Config {
	return email.Config{
		Addr: c.SMTP, Username: c.Username, Password: c.Password, From: c.From, TLS: c.TLS,
		Timeout: time.Duration(c.Timeout), RateLimit: c.RateLimit, RatePeriod: time.Duration(c.RatePeriod),
		Senders: senders,
	}
}

// unmarshalEmail parses
//
//	email {
//		smtp     <host:port>
//		username <user>
//		password <password>
//		from     <address>
//		tls      mandatory|opportunistic|implicit|off
//		timeout  <duration>
//		rate_limit <n> [<period>]
//	}
func (a *App) unmarshalEmail(d *caddyfile.Dispenser) error {
	if a.Email != nil {
		return d.Err("email already specified")
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	c := &EmailConfig{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "smtp":
			err = oneArg(d, &c.SMTP)
		case "username":
			err = oneArg(d, &c.Username)
		case "password":
			err = oneArg(d, &c.Password)
		case "from":
			err = oneArg(d, &c.From)
		case "tls":
			err = oneArg(d, &c.TLS)
		case "timeout":
			err = parseDuration(d, &c.Timeout)
		case "rate_limit":
			err = c.unmarshalRate(d)
		default:
			err = d.Errf("unrecognized email option '%s'", d.Val())
		}
		if err != nil {
			return err
		}
	}
	if c.SMTP == "" {
		return d.Err("email: smtp <host:port> is required")
	}
	// The checks of the sender itself (addresses, tls, credentials), at the block's line. Project
	// senders are checked when the app provisions.
	if _, err := email.New(c.config(nil)); err != nil {
		return d.Err(err.Error())
	}
	a.Email = c
	return nil
}

// unmarshalRate parses `rate_limit <n> [<period>]`.
func (c *EmailConfig) unmarshalRate(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 2 {
		return d.ArgErr()
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n <= 0 {
		return d.Errf("invalid rate_limit '%s': must be a positive integer", args[0])
	}
	c.RateLimit = n
	if len(args) == 2 {
		dur, err := caddy.ParseDuration(args[1])
		if err != nil || dur <= 0 {
			return d.Errf("invalid rate_limit period '%s': must be a positive duration", args[1])
		}
		c.RatePeriod = caddy.Duration(dur)
	}
	return nil
}

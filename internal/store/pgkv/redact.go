package pgkv

import (
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// redactedError hides the DSN's secrets in an error's text, whatever layer
// (pgx, the network, the server) put them there; errors.Is and As still
// see the cause.
type redactedError struct {
	err     error
	secrets []string
}

func (e *redactedError) Error() string {
	s := e.err.Error()
	for _, secret := range e.secrets {
		s = strings.ReplaceAll(s, secret, "xxxxx")
	}
	return s
}

func (e *redactedError) Unwrap() error { return e.err }

// redact wraps err so that its text shows neither the DSN nor its
// password; nil stays nil.
func redact(err error, dsn string) error {
	if err == nil {
		return nil
	}
	return &redactedError{err: err, secrets: dsnSecrets(dsn)}
}

// dsnSecrets returns what of a DSN must not be shown: the whole DSN and
// its password, found by pgconn's parser or, for a DSN it refuses, by
// reading the URL's user info or the password= pair.
func dsnSecrets(dsn string) []string {
	secrets := []string{dsn}
	add := func(p string) {
		if p != "" {
			secrets = append(secrets, p, url.QueryEscape(p), url.PathEscape(p))
		}
	}
	if cfg, err := pgconn.ParseConfig(dsn); err == nil {
		add(cfg.Password)
	}
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		p, _ := u.User.Password()
		add(p)
	} else if i := strings.Index(dsn, "://"); i >= 0 {
		// A URL net/url refuses (a bad port, say): user:password@ by hand.
		rest := dsn[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, p, ok := strings.Cut(rest[:at], ":"); ok {
				add(p)
			}
		}
	}
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "password="); ok {
			add(strings.Trim(v, `'`))
		}
	}
	return secrets
}

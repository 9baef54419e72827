package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/fhirgate/fhirgate/internal/egress"
	"github.com/fhirgate/fhirgate/internal/store"
)

// EgressConfig is a project's egress allow-list: the only hosts its
// webhooks and its bots' `fetch` may reach. Everything else is refused
// (default deny). An entry is `host` or `host:port`: a DNS name, a `*.`
// wildcard of one label, or an IP address (IPv6 in brackets with a port);
// without a port the scheme's default port (443, or 80 for http). Every
// address a name resolves to is checked when connecting: loopback,
// private, link-local, unique-local, carrier-grade NAT and cloud metadata
// addresses are refused unless listed (see docs/egress.md).
type EgressConfig struct {
	// Allow lists the hosts reachable over https.
	Allow []string `json:"allow,omitempty"`

	// AllowHTTP lists the hosts reachable over plain http (and https).
	AllowHTTP []string `json:"allow_http,omitempty"`

	// AllowPrivate lists addresses or CIDR ranges that allowed names may
	// resolve to although they are private or otherwise special (a cloud
	// metadata address only when listed by itself). An IP address listed
	// in `allow` or `allow_http` needs no entry here.
	AllowPrivate []string `json:"allow_private,omitempty"`
}

// record is the allow-list as the project record stores it; nil when empty.
func (c *EgressConfig) record() *store.ProjectEgress {
	if c == nil || len(c.Allow)+len(c.AllowHTTP)+len(c.AllowPrivate) == 0 {
		return nil
	}
	return &store.ProjectEgress{Allow: c.Allow, AllowHTTP: c.AllowHTTP, AllowPrivate: c.AllowPrivate}
}

// check reports a malformed entry with the config's names
// ("allow_http '…': …"), before the store's check of the record would name
// the record's.
func (c *EgressConfig) check() error {
	if r := c.record(); r != nil {
		if err := r.Policy().Check(); err != nil {
			return fmt.Errorf("egress: %w", err)
		}
	}
	return nil
}

// unmarshalEgress reads a project's egress block. Syntax:
//
//	egress {
//		allow         <host[:port]>...
//		allow_http    <host[:port]>...
//		allow_private <address|cidr>...
//	}
func (p *ProjectConfig) unmarshalEgress(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if p.Egress != nil {
		return d.Err("egress already specified")
	}
	p.Egress = new(EgressConfig)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "allow":
			err = moreArgs(d, &p.Egress.Allow)
		case "allow_http":
			err = moreArgs(d, &p.Egress.AllowHTTP)
		case "allow_private":
			err = moreArgs(d, &p.Egress.AllowPrivate)
		default:
			err = d.Errf("unrecognized egress option '%s'", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// projectLookupTimeout bounds reading a project's allow-list from the store.
const projectLookupTimeout = 5 * time.Second

// newEgress returns the egress of a config: each project's allow-list is
// read from its record in st (declared in the Caddyfile or set through the
// admin API), so a change takes effect at the next request.
func newEgress(st *store.Store) *egress.Egress {
	return egress.New(egress.Options{Lookup: func(projectID string) (*egress.Policy, error) {
		ctx, cancel := context.WithTimeout(context.Background(), projectLookupTimeout)
		defer cancel()
		p, err := store.Get[store.Project](ctx, st, projectID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return p.Egress.Policy(), nil
	}})
}

// Egress is the config's egress: the HTTP client of each project, held to
// its allow-list, for webhooks and bots' fetch. Nil before Provision.
func (a *App) Egress() *egress.Egress { return a.egress }

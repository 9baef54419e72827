package caddymodule

import (
	"context"
	"errors"

	"github.com/fhirgate/fhirgate/internal/store"
)

// declaredIdentityProvider is the client's identity provider, or nil for a
// client that only signs in as itself.
func declaredIdentityProvider(c *ClientConfig) *store.IdentityProvider {
	if c.UserinfoURL == "" && c.IdPJWKSURI == "" && c.IdPIssuer == "" && len(c.IdPAudience) == 0 &&
		!c.UseSubject && !c.AllowUnverifiedEmail && c.Timeout == 0 && c.CacheTTL == 0 {
		return nil
	}
	return &store.IdentityProvider{
		UserInfoURL:          c.UserinfoURL,
		JWKSURI:              c.IdPJWKSURI,
		Issuer:               c.IdPIssuer,
		Audience:             c.IdPAudience,
		UseSubject:           c.UseSubject,
		AllowUnverifiedEmail: c.AllowUnverifiedEmail,
		Timeout:              durationString(c.Timeout),
		CacheTTL:             durationString(c.CacheTTL),
	}
}

// machineMembership is the membership a declared client signs in with:
// user and profile the client itself, as in Medplum.
func machineMembership(pid, cid string, admin bool) *store.ProjectMembership {
	m := selfMembership(pid, "ClientApplication/"+cid)
	m.Admin = admin
	return m
}

// selfMembership is the membership of a principal that is its own profile
// (a client, a bot) in project pid, with the id the config derives for it.
func selfMembership(pid, ref string) *store.ProjectMembership {
	m := &store.ProjectMembership{
		Project: store.Reference{Reference: "Project/" + pid},
		User:    store.Reference{Reference: ref},
		Profile: &store.Reference{Reference: ref},
	}
	m.ID = declaredID("membership", pid, ref)
	m.Meta.Project = pid
	return m
}

// planMachine adds a client's membership, keeping the id of one made
// through the admin API.
func planMachine(ctx context.Context, st *store.Store, pid string, m *store.ProjectMembership, add func(store.Resource) error) error {
	existing, err := st.MembershipsByProjectUser(ctx, pid, m.User.Reference)
	if err != nil {
		return err
	}
	if len(existing) > 0 {
		m.ID = existing[0].ID
	}
	return add(m)
}

// keepSecretHashes replaces the declared client's clear secrets by the
// stored hashes they match, so that reloading an unchanged config does not
// rewrite the client (each hash has its own salt). A declared retiring
// secret that is the stored current one (the first step of a rotation)
// keeps that hash too.
func keepSecretHashes(ctx context.Context, st *store.Store, c *store.ClientApplication) error {
	old, err := store.Get[store.ClientApplication](ctx, st, c.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	keep := func(clear *string, stored ...string) {
		if *clear == "" || store.IsHashedSecret(*clear) {
			return
		}
		for _, h := range stored {
			if h != "" && store.VerifySecret(h, *clear) {
				*clear = h
				return
			}
		}
	}
	keep(&c.Secret, old.Secret)
	keep(&c.RetiringSecret, old.RetiringSecret, old.Secret)
	return nil
}

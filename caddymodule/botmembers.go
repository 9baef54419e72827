package caddymodule

import (
	"context"

	"github.com/fhirgate/fhirgate/internal/store"
)

// A declared bot's `scope` lives on its membership, as an admin API user
// would set it (docs/bots.md "A bot's scope"): a ProjectMembership of the
// bot's project whose user and profile are Bot/{id}. The config owns that
// scope the way it owns the bot's other declared fields.

// botMembershipRecord is the membership the config makes for a bot that
// has none.
func botMembershipRecord(pid, botID, scope string) *store.ProjectMembership {
	m := selfMembership(pid, "Bot/"+botID)
	m.Scope = scope
	return m
}

// planBotMembership gives every membership of the bot the declared scope
// (the first active one is the one that counts, so all of them do, and a
// scope removed from the config is cleared from them); it makes one only
// when there is a scope to hold. A membership's other fields (active,
// made through the admin API) are kept.
func planBotMembership(ctx context.Context, st *store.Store, pid, botID, scope string, add func(store.Resource) error) error {
	existing, err := st.MembershipsByProjectUser(ctx, pid, "Bot/"+botID)
	if err != nil {
		return err
	}
	if len(existing) == 0 {
		if scope == "" {
			return nil
		}
		return add(botMembershipRecord(pid, botID, scope))
	}
	for _, m := range existing {
		m := clone(m)
		m.Scope = scope
		if err := add(m); err != nil {
			return err
		}
	}
	return nil
}

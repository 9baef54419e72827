package oauth

import (
	"context"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
)

// exchangeReason is the error reason of an exchange, "" when it succeeded.
func (e *env) exchangeReason(client, subject string) string {
	e.t.Helper()
	rec := e.exchange(client, subject)
	if rec.Code == 200 {
		return ""
	}
	body := decode(e.t, rec)
	reason, _ := body["error"].(string)
	if d, ok := body["error_description"].(string); ok {
		reason += ": " + d
	}
	return reason
}

// edit reads a record through st, changes it and writes it back.
func edit[T any, P interface {
	*T
	store.Resource
}](t *testing.T, st *store.Store, id string, change func(P)) {
	t.Helper()
	ctx := context.Background()
	r, err := store.Get[T, P](ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	change(r)
	if _, err := st.Put(ctx, r, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) membershipOf(email string) *store.ProjectMembership {
	e.t.Helper()
	ctx := context.Background()
	u, err := e.st.UserByEmail(ctx, email)
	if err != nil {
		e.t.Fatal(err)
	}
	ms, err := e.st.MembershipsByProjectUser(ctx, "p1", u.ID)
	if err != nil || len(ms) != 1 {
		e.t.Fatalf("memberships of %s: %v, %v", email, ms, err)
	}
	return ms[0]
}

// Every write of a record the token endpoint caches acts on the next
// exchange: the client, the membership and the user's address.
func TestExchangeCachesFollowWrites(t *testing.T) {
	e := newEnv(t)
	ok := func(step string) {
		t.Helper()
		if r := e.exchangeReason("web", "alice"); r != "" {
			t.Fatalf("%s: exchange refused: %s", step, r)
		}
	}
	refused := func(step string) {
		t.Helper()
		if r := e.exchangeReason("web", "alice"); r == "" {
			t.Fatalf("%s: exchange succeeded, want it refused", step)
		}
	}
	ok("warm")
	ok("cached")

	m := e.membershipOf("alice@example.com")
	edit(t, e.st, m.ID, func(m *store.ProjectMembership) { m.Active = new(bool) })
	refused("membership deactivated")
	edit(t, e.st, m.ID, func(m *store.ProjectMembership) { m.Active = nil })
	ok("membership active again")

	edit(t, e.st, "web", func(c *store.ClientApplication) { c.Status = "inactive" })
	refused("client inactive")
	edit(t, e.st, "web", func(c *store.ClientApplication) { c.Status = "" })
	ok("client active again")

	// Through a use-subject client: the membership by externalId, the user
	// by id.
	bySubject := func(step string, wantOK bool) {
		t.Helper()
		if r := e.exchangeReason("sub-client", "alice-sub"); (r == "") != wantOK {
			t.Fatalf("%s: exchange by subject answered %q, want success %v", step, r, wantOK)
		}
	}
	bySubject("warm", true)
	bySubject("cached", true)
	edit(t, e.st, m.ID, func(m *store.ProjectMembership) { m.ExternalID = "idp|someone-else" })
	bySubject("externalId changed", false)
	edit(t, e.st, m.ID, func(m *store.ProjectMembership) { m.ExternalID = "idp|alice" })
	bySubject("externalId back", true)

	edit(t, e.st, m.User.Reference[len("User/"):], func(u *store.User) { u.Email = "alice@elsewhere.example" })
	refused("address moved to another one")
}

// A write the store's change counters have not seen yet (another replica's,
// before its notification arrives) is served from the cache; once the
// counters move, as the change feed makes them move for another replica's
// write or on a reconnect (Invalidate), the next exchange reads it.
func TestExchangeCachesFlushedByInvalidate(t *testing.T) {
	e := newEnv(t)
	if r := e.exchangeReason("web", "alice"); r != "" {
		t.Fatalf("exchange refused: %s", r)
	}
	// A second Store on the same KV: its writes move only its own
	// counters, as a replica's do before its notification is heard.
	other := store.New(e.st.KV(), store.Options{})
	m := e.membershipOf("alice@example.com")
	edit(t, other, m.ID, func(m *store.ProjectMembership) { m.Active = new(bool) })
	edit(t, other, "web", func(c *store.ClientApplication) { c.Status = "inactive" })
	if r := e.exchangeReason("web", "alice"); r != "" {
		t.Fatalf("unannounced writes: the cached records must still be used, got %s", r)
	}
	e.st.Invalidate()
	if r := e.exchangeReason("web", "alice"); r == "" {
		t.Fatal("after Invalidate the exchange still used the cached client and membership")
	}
	edit(t, other, "web", func(c *store.ClientApplication) { c.Status = "" })
	e.st.Invalidate()
	if r := e.exchangeReason("web", "alice"); r == "" {
		t.Fatal("after Invalidate the exchange still used the cached membership")
	}
}

package oauth

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/userinfo"
)

// fakeClock is a settable time source for the session cache.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestSessionCacheBoundsStalenessAndRevocationIsImmediate(t *testing.T) {
	e := newEnv(t)
	clock := &fakeClock{t: time.Now()}
	srv, err := New(Options{Store: e.st, Tokens: e.tok, UserInfo: userinfo.New(userinfo.Options{}), Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	access := decode(t, e.exchange("web", "alice"))["access_token"].(string)
	id, aerr := e.authenticate(access)
	if aerr != nil {
		t.Fatal(aerr)
	}

	// Deactivating the membership through the store (the admin API, here
	// or on another replica through the change feed) shows on the next
	// request, although the entry is within its TTL.
	ctx := context.Background()
	m, err := store.Get[store.ProjectMembership](ctx, e.st, id.MembershipID)
	if err != nil {
		t.Fatal(err)
	}
	inactive := false
	m.Active = &inactive
	if _, err := e.st.Put(ctx, m, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, aerr := e.authenticate(access); aerr == nil || aerr.Reason != "membership" {
		t.Fatalf("right after the deactivation: %v", aerr)
	}
	m.Active = nil
	if _, err := e.st.Put(ctx, m, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, aerr := e.authenticate(access); aerr != nil {
		t.Fatalf("reactivated: %v", aerr)
	}

	// A change the counters cannot see (written to the KV under the
	// Store) shows once the cached entry is older than the TTL, not before.
	m.Active = &inactive
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	err = e.st.KV().Update(ctx, func(tx store.Txn) error {
		return tx.Set([]byte("r/ProjectMembership/"+m.ID), raw, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, aerr := e.authenticate(access); aerr != nil {
		t.Fatalf("within the session TTL the cached sign-in is used: %v", aerr)
	}
	clock.advance(DefaultSessionCacheTTL + time.Millisecond)
	if _, aerr := e.authenticate(access); aerr == nil || aerr.Reason != "membership" {
		t.Fatalf("after the TTL the deactivation must show: %v", aerr)
	}

	// Revocation through the server acts on the very next request, cache
	// or not.
	m.Active = nil
	if _, err := e.st.Put(ctx, m, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.advance(DefaultSessionCacheTTL + time.Millisecond)
	if _, aerr := e.authenticate(access); aerr != nil {
		t.Fatalf("reactivated: %v", aerr)
	}
	rec := e.post(e.srv.ServeRevoke, map[string][]string{"token": {access}}, "", "")
	if rec.Code != 200 {
		fail(t, rec, "revoke")
	}
	if _, aerr := e.authenticate(access); aerr == nil || aerr.Reason != "revoked" {
		t.Fatalf("right after revocation: %v", aerr)
	}
}

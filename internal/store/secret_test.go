package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestSecretsAreStoredHashedAndVerify(t *testing.T) {
	h := HashSecret("a-long-random-secret")
	if !IsHashedSecret(h) || h == HashSecret("a-long-random-secret") {
		t.Fatalf("hash %q: want a salted hash, different each time", h)
	}
	if !VerifySecret(h, "a-long-random-secret") || VerifySecret(h, "a-long-random-secreT") || VerifySecret(h, "") {
		t.Fatal("VerifySecret does not tell the secret apart")
	}
	if HashSecret(h) != h {
		t.Fatal("hashing a hash changed it: a client read back and written again would lose its secret")
	}
	if !VerifySecret("legacy-clear", "legacy-clear") || VerifySecret("legacy-clear", "other") {
		t.Fatal("a secret still stored in clear does not verify")
	}
	if VerifySecret("$pbkdf2-sha256$1$bad", "x") {
		t.Fatal("a malformed hash verified")
	}
}

func TestClientSecretsAreHashedOnWriteAndMigrated(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	if err := s.Create(ctx, &Project{Name: "P"}, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	projects, _ := s.List(ctx, "Project", Filter{Limit: 1})
	pid := projects[0].Base().ID
	c := &ClientApplication{Secret: "first-secret-value", RetiringSecret: "older-secret-value"}
	c.ID, c.Meta.Project = "ci", pid
	if _, err := s.Put(ctx, c, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := Get[ClientApplication](ctx, s, "ci")
	if err != nil {
		t.Fatal(err)
	}
	if !VerifySecret(got.Secret, "first-secret-value") || !VerifySecret(got.RetiringSecret, "older-secret-value") ||
		!IsHashedSecret(got.Secret) || !IsHashedSecret(got.RetiringSecret) {
		t.Fatalf("stored %+v", got)
	}

	// A client written in clear by an older release: raw JSON in the KV.
	legacy := map[string]any{"resourceType": "ClientApplication", "id": "old", "secret": "clear-secret-value",
		"meta": map[string]any{"project": pid, "versionId": "v1"}}
	raw, _ := json.Marshal(legacy)
	if err := s.KV().Update(ctx, func(tx Txn) error { return tx.Set(recordKey("ClientApplication", "old"), raw, 0) }); err != nil {
		t.Fatal(err)
	}
	n, err := s.MigrateClientSecrets(ctx)
	if err != nil || n != 1 {
		t.Fatalf("migrated %d, %v; want 1", n, err)
	}
	old, err := Get[ClientApplication](ctx, s, "old")
	if err != nil || !IsHashedSecret(old.Secret) || !VerifySecret(old.Secret, "clear-secret-value") {
		t.Fatalf("after migration %+v, %v", old, err)
	}
	if n, err := s.MigrateClientSecrets(ctx); err != nil || n != 0 {
		t.Fatalf("a second migration rewrote %d clients (%v)", n, err)
	}
}

func TestMachineMembershipsAreFoundByTheClient(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	p := &Project{Name: "P"}
	p.ID = "p"
	if _, err := s.Put(ctx, p, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	c := &ClientApplication{}
	c.ID, c.Meta.Project = "ci", "p"
	if _, err := s.Put(ctx, c, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	m := &ProjectMembership{Project: Reference{Reference: "Project/p"}, User: Reference{Reference: "ClientApplication/ci"}, Admin: true}
	if err := s.Create(ctx, m, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	ms, err := s.MembershipsByProjectUser(ctx, "p", "ClientApplication/ci")
	if err != nil || len(ms) != 1 || ms[0].ID != m.ID {
		t.Fatalf("memberships of the client: %v, %v", ms, err)
	}
	if ms, _ := s.MembershipsByProjectUser(ctx, "p", "ci"); len(ms) != 0 {
		t.Fatal("the client's membership is found as a User with the client's id")
	}
	ghost := &ProjectMembership{Project: Reference{Reference: "Project/p"}, User: Reference{Reference: "ClientApplication/nobody"}}
	if err := s.Create(ctx, ghost, PutOptions{}); err == nil {
		t.Fatal("a membership of a missing client was stored")
	}
}

func TestClaimOnceRefusesAReplayUntilItExpires(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	if err := s.ClaimOnce(ctx, "client-assertion", "ci/j1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimOnce(ctx, "client-assertion", "ci/j1", time.Minute); !errors.Is(err, ErrConflict) {
		t.Fatalf("replay: %v, want ErrConflict", err)
	}
	if err := s.ClaimOnce(ctx, "client-assertion", "other/j1", time.Minute); err != nil {
		t.Fatalf("the same jti of another client: %v", err)
	}
}

package tokens

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func TestNewGeneratesAndSavesTheFirstKeyOnlyOnce(t *testing.T) {
	store := newMemStore()
	first := newEnv(t, Options{Keys: store})
	if store.saves != 1 {
		t.Fatalf("saves = %d after first start, want 1", store.saves)
	}
	second := newEnv(t, Options{Keys: store})
	if store.saves != 1 {
		t.Fatalf("saves = %d after second start, want 1", store.saves)
	}
	if first.svc.SigningKeyID() != second.svc.SigningKeyID() {
		t.Fatal("second start signs with a different key")
	}
	if k := store.key(t, first.svc.SigningKeyID()); !k.Active || k.Created.IsZero() {
		t.Fatalf("stored key %+v", k)
	}
}

func TestNewRequiresIssuerAndStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"no issuer", Options{Keys: newMemStore()}},
		{"no store", Options{Issuer: testIssuer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(context.Background(), tc.opts); err == nil {
				t.Fatal("New succeeded")
			}
		})
	}
}

func TestRotationKeepsLiveTokensValid(t *testing.T) {
	e := newEnv(t, Options{})
	oldKid := e.svc.SigningKeyID()
	before := e.access(t, time.Hour)

	fresh, err := e.svc.Rotate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if fresh.ID == oldKid || e.svc.SigningKeyID() != fresh.ID {
		t.Fatalf("signing kid %s after rotation to %s (old %s)", e.svc.SigningKeyID(), fresh.ID, oldKid)
	}
	if old := e.store.key(t, oldKid); old.Active || !old.Retired.Equal(e.clock.Now()) {
		t.Fatalf("old key after rotation: active %v retired %v", old.Active, old.Retired)
	}
	after := e.access(t, time.Hour)
	if kid := decodePart(t, after, 0)["kid"]; kid != fresh.ID {
		t.Fatalf("new token signed by %v", kid)
	}
	for name, tok := range map[string]string{"before": before, "after": after} {
		if _, err := e.svc.Verify(context.Background(), tok, KindAccess); err != nil {
			t.Fatalf("%s rotation token rejected: %v", name, err)
		}
	}
	if got := jwksKids(t, e.svc.JWKS()); len(got) != 2 || got[0] != fresh.ID || got[1] != oldKid {
		t.Fatalf("JWKS kids %v, want [%s %s]", got, fresh.ID, oldKid)
	}
}

// A retired key verifies for MaxTokenLifetime after retirement, then stops,
// even for a token whose own exp is later (forged with the key, or issued by
// a misconfigured replica).
func TestRetiredKeyStopsVerifyingAfterMaxTokenLifetime(t *testing.T) {
	const maxLife = 24 * time.Hour
	e := newEnv(t, Options{MaxTokenLifetime: maxLife, CacheSize: -1})
	oldKey := e.signer(t)
	claims := validClaims(e.clock.Now())
	claims["exp"] = e.clock.Now().Add(10 * maxLife).Unix()
	long := signES256(t, oldKey.Private, accessHeader(oldKey.ID), claims)

	if _, err := e.svc.Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		advance time.Duration
		want    Reason
		inJWKS  bool
	}{
		{"just rotated", 0, "", true},
		{"inside the grace period", maxLife - time.Second, "", true},
		{"grace period over", time.Second, ReasonUnknownKey, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.clock.Advance(tc.advance)
			_, err := e.svc.Verify(context.Background(), long, KindAccess)
			if tc.want == "" && err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if tc.want != "" {
				wantReason(t, err, tc.want)
			}
			inJWKS := false
			for _, kid := range jwksKids(t, e.svc.JWKS()) {
				inJWKS = inJWKS || kid == oldKey.ID
			}
			if inJWKS != tc.inJWKS {
				t.Fatalf("old key in JWKS = %v, want %v", inJWKS, tc.inJWKS)
			}
		})
	}
	if err := e.svc.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.Verify(context.Background(), long, KindAccess)
	wantReason(t, err, ReasonUnknownKey)
}

// TestUnknownKidReloadsAnotherReplicasRotation: a token signed with a key
// another replica just created verifies at once (the keyring is reloaded
// before the token is refused); forged kids cause at most one reload per
// unknownKidReloadEvery.
func TestUnknownKidReloadsAnotherReplicasRotation(t *testing.T) {
	store := newMemStore()
	a := newEnv(t, Options{Keys: store})
	b := newEnv(t, Options{Keys: store})
	if _, err := a.svc.Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	tok := a.access(t, time.Hour)
	if _, err := b.svc.Verify(context.Background(), tok, KindAccess); err != nil {
		t.Fatalf("a token of a key another replica created: %v", err)
	}
	if a.svc.SigningKeyID() != b.svc.SigningKeyID() {
		t.Fatal("replicas sign with different keys after the reload")
	}

	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	forged := func(i int) string {
		return signES256(t, priv, accessHeader(fmt.Sprintf("00000000-0000-4000-8000-%012d", i)), validClaims(b.clock.Now()))
	}
	b.clock.Advance(unknownKidReloadEvery)
	loads := store.loads
	for i := range 5 {
		_, err := b.svc.Verify(context.Background(), forged(i), KindAccess)
		wantReason(t, err, ReasonUnknownKey)
	}
	if n := store.loads - loads; n != 1 {
		t.Fatalf("5 forged kids at one instant loaded the keys %d times, want 1", n)
	}
	b.clock.Advance(unknownKidReloadEvery)
	_, err = b.svc.Verify(context.Background(), forged(9), KindAccess)
	wantReason(t, err, ReasonUnknownKey)
	if n := store.loads - loads; n != 2 {
		t.Fatalf("after the interval, loads = %d, want 2", n)
	}
}

// TestKeysChangedReloads: when the store reports a change of the keys, the
// next use reloads them, so a key retired and removed on another replica
// stops verifying here and a new signing key signs here too.
func TestKeysChangedReloads(t *testing.T) {
	store := newMemStore()
	a := newEnv(t, Options{Keys: store, KeysChanged: store.changes.Load})
	b := newEnv(t, Options{Keys: store, KeysChanged: store.changes.Load})
	old, oldKid := b.access(t, time.Hour), b.svc.SigningKeyID()
	if _, err := b.svc.Verify(context.Background(), old, KindAccess); err != nil {
		t.Fatal(err)
	}
	fresh, err := a.svc.Rotate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b.svc.JWKS(); b.svc.SigningKeyID() != fresh.ID {
		t.Fatalf("B signs with %s after A's rotation, want %s", b.svc.SigningKeyID(), fresh.ID)
	}
	store.delete(oldKid)
	loads := store.loads
	_, err = b.svc.Verify(context.Background(), old, KindAccess)
	wantReason(t, err, ReasonUnknownKey)
	if store.loads == loads {
		t.Fatal("a change of the keys did not reload them")
	}
	tok := a.access(t, time.Hour) // A reloads once too, after its own rotation
	loads = store.loads
	for range 3 {
		if _, err := b.svc.Verify(context.Background(), tok, KindAccess); err != nil {
			t.Fatal(err)
		}
	}
	if store.loads != loads {
		t.Fatalf("verifications without a change loaded the keys %d times", store.loads-loads)
	}
}

func TestRotateBuildsOnTheStoreNotOnStaleState(t *testing.T) {
	store := newMemStore()
	a := newEnv(t, Options{Keys: store})
	b := newEnv(t, Options{Keys: store})
	ka, err := a.svc.Rotate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	kb, err := b.svc.Rotate(context.Background()) // b never reloaded
	if err != nil {
		t.Fatal(err)
	}
	keys, err := store.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	active := 0
	for _, k := range keys {
		if k.Active {
			active++
			if k.ID != kb.ID {
				t.Fatalf("active key %s, want %s", k.ID, kb.ID)
			}
		}
	}
	if active != 1 {
		t.Fatalf("%d active keys", active)
	}
	tok := signES256(t, store.key(t, ka.ID).Private, accessHeader(ka.ID), validClaims(b.clock.Now()))
	if _, err := b.svc.Verify(context.Background(), tok, KindAccess); err != nil {
		t.Fatalf("token of a's short-lived key rejected by b: %v", err)
	}
}

func TestReloadForgetsCachedTokensOfRemovedKeys(t *testing.T) {
	e := newEnv(t, Options{})
	oldKid := e.svc.SigningKeyID()
	tok := e.access(t, time.Hour)
	if _, err := e.svc.Verify(context.Background(), tok, KindAccess); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Verify(context.Background(), tok, KindAccess); err != nil {
		t.Fatalf("rotation broke a live token: %v", err)
	}
	e.store.delete(oldKid) // e.g. the operator removes a compromised key
	if err := e.svc.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.Verify(context.Background(), tok, KindAccess)
	wantReason(t, err, ReasonUnknownKey)
}

func TestReloadKeepsCurrentKeysOnBadStore(t *testing.T) {
	e := newEnv(t, Options{})
	kid := e.svc.SigningKeyID()
	e.store.delete(kid) // no active key left
	if err := e.svc.Reload(context.Background()); err == nil {
		t.Fatal("Reload accepted a store without an active key")
	}
	if e.svc.SigningKeyID() != kid {
		t.Fatal("keys changed after a failed Reload")
	}
}

func jwksKids(t *testing.T, doc []byte) []string {
	t.Helper()
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(doc, &set); err != nil {
		t.Fatalf("JWKS %s: %v", doc, err)
	}
	var kids []string
	for _, k := range set.Keys {
		kids = append(kids, k.Kid)
	}
	return kids
}

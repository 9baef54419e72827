package store

import (
	"context"
	"errors"
	"testing"
)

func TestNormalizeEmailFoldsASCIILettersOnly(t *testing.T) {
	cases := []struct{ in, want string }{
		{"Alice@Example.COM", "alice@example.com"},
		{"alice@example.com", "alice@example.com"},
		{"\u212Aate@a.test", "\u212Aate@a.test"},         // KELVIN SIGN stays, never "k"
		{"\u212Aate@A.test", "\u212Aate@a.test"},         // ASCII around it still folds
		{"J\u00D6HN@x.test", "j\u00D6hn@x.test"},         // Ö keeps its case
		{"\u0130stanbul@x.test", "\u0130stanbul@x.test"}, // dotted capital I is not "i"
		{"\u017Fam@x.test", "\u017Fam@x.test"},           // long s is not "s"
		{"", ""},
	}
	for _, c := range cases {
		if got := NormalizeEmail(c.in); got != c.want {
			t.Errorf("NormalizeEmail(%+q) = %+q, want %+q", c.in, got, c.want)
		}
	}
}

// TestNonASCIIEmailNeverFoldsOntoASCII: an address with a character that
// Unicode folds to an ASCII letter (U+212A KELVIN SIGN → k) finds nothing
// when only the ASCII address exists, through every lookup, and the two
// are distinct users. ASCII letters still match in any case.
func TestNonASCIIEmailNeverFoldsOntoASCII(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	kate := seedUser(t, s, "kate@a.test")
	const kelvin = "\u212Aate@a.test"

	if u, err := s.UserByEmail(ctx, kelvin); !errors.Is(err, ErrNotFound) {
		t.Fatalf("UserByEmail(%+q) = %v, %v; want ErrNotFound", kelvin, u, err)
	}
	if got, err := s.List(ctx, "User", Filter{Email: kelvin}); err != nil || len(got) != 0 {
		t.Fatalf("List email=%+q: %d users, %v; want none", kelvin, len(got), err)
	}
	for _, same := range []string{"kate@a.test", "KATE@A.TEST", "Kate@a.Test"} {
		u, err := s.UserByEmail(ctx, same)
		if err != nil || u.ID != kate.ID {
			t.Fatalf("UserByEmail(%+q) = %v, %v; want kate", same, u, err)
		}
		if got, err := s.List(ctx, "User", Filter{Email: same}); err != nil || len(got) != 1 {
			t.Fatalf("List email=%+q: %d users, %v; want kate", same, len(got), err)
		}
	}

	// A different address, so a different user: creating it is no conflict,
	// and each finds only itself.
	k := seedUser(t, s, kelvin)
	if u, err := s.UserByEmail(ctx, kelvin); err != nil || u.ID != k.ID {
		t.Fatalf("UserByEmail(%+q) = %v, %v; want the Kelvin-sign user", kelvin, u, err)
	}
	if u, err := s.UserByEmail(ctx, "kate@a.test"); err != nil || u.ID != kate.ID {
		t.Fatalf("UserByEmail(kate) = %v, %v; want kate", u, err)
	}
	if err := s.Create(ctx, &User{Email: "\u212Aate@A.TEST"}, PutOptions{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("the Kelvin-sign address in other ASCII case: %v, want ErrConflict", err)
	}
}

// legacyIndex rewrites u's email index entry the way releases before
// NormalizeEmail kept it: under strings.ToLower of the address.
func legacyIndex(t *testing.T, s *Store, u *User) {
	t.Helper()
	err := s.kv.Update(context.Background(), func(tx Txn) error {
		if err := tx.Delete(uniqueKey(idxUserEmail, NormalizeEmail(u.Email))); err != nil {
			return err
		}
		return tx.Set(legacyEmailKey(u.Email), []byte(u.ID), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrateEmailIndexMovesLegacyEntries: a store written by an older
// release holds the Kelvin-sign user under "kate@a.test" and "JÖHN@x.test"
// under "jöhn@x.test". Before the migration those entries fold nothing onto
// anyone (lookups check the address); after it each user is found by its
// exact address, the ASCII address is free, and a second run does nothing.
func TestMigrateEmailIndexMovesLegacyEntries(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	k := seedUser(t, s, "\u212Aate@a.test")
	j := seedUser(t, s, "J\u00D6HN@x.test")
	plain := seedUser(t, s, "Plain@x.test")
	legacyIndex(t, s, k)
	legacyIndex(t, s, j)

	if _, err := s.UserByEmail(ctx, "kate@a.test"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before migrating, kate@a.test found the Kelvin-sign user: %v", err)
	}
	if _, err := s.UserByEmail(ctx, "j\u00F6hn@x.test"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before migrating, jöhn@x.test found JÖHN: %v", err)
	}

	moved, err := s.MigrateEmailIndex(ctx)
	if err != nil || moved != 2 {
		t.Fatalf("MigrateEmailIndex = %d, %v; want 2 users moved", moved, err)
	}
	for _, c := range []struct {
		email string
		id    string
	}{{"\u212Aate@a.test", k.ID}, {"J\u00D6HN@X.TEST", j.ID}, {"plain@x.test", plain.ID}} {
		if u, err := s.UserByEmail(ctx, c.email); err != nil || u.ID != c.id {
			t.Fatalf("after migrating, UserByEmail(%+q) = %v, %v", c.email, u, err)
		}
	}
	for _, legacy := range [][]byte{legacyEmailKey(k.Email), legacyEmailKey(j.Email)} {
		err := s.kv.View(ctx, func(tx Txn) error { _, err := tx.Get(legacy); return err })
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("legacy entry %+q still there: %v", legacy, err)
		}
	}
	if err := s.Create(ctx, &User{Email: "kate@a.test"}, PutOptions{}); err != nil {
		t.Fatalf("kate@a.test after migrating: %v", err)
	}
	if moved, err := s.MigrateEmailIndex(ctx); err != nil || moved != 0 {
		t.Fatalf("second MigrateEmailIndex = %d, %v; want nothing to do", moved, err)
	}
	// The migrated user's entry is maintained by later writes: changing
	// the address frees the old one.
	j.Email = "john@x.test"
	if _, err := s.Put(ctx, j, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UserByEmail(ctx, "J\u00D6HN@x.test"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old address still found after a change: %v", err)
	}
	if err := s.Create(ctx, &User{Email: "J\u00D6HN@x.test"}, PutOptions{}); err != nil {
		t.Fatalf("the freed address: %v", err)
	}
}

package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// OpenTestBadger opens the Badger KV (package badgerkv) in dir; the
// caller closes it. badgerkv imports this package, so the tests here reach
// it through this hook, which postgres_test.go's TestMain sets.
var OpenTestBadger func(dir string) (KV, error)

// openTestKV opens a real Badger in a fresh temporary directory, closed
// when t ends.
func openTestKV(t testing.TB) (KV, string) {
	t.Helper()
	dir := t.TempDir()
	return openTestKVIn(t, dir), dir
}

// openTestKVIn opens a real Badger in dir, closed when t ends.
func openTestKVIn(t testing.TB, dir string) KV {
	t.Helper()
	kv, err := OpenTestBadger(dir)
	if err != nil {
		t.Fatalf("opening badger: %v", err)
	}
	t.Cleanup(func() {
		if err := kv.Close(); err != nil {
			t.Errorf("closing badger: %v", err)
		}
	})
	return kv
}

// OpenTestStoreKV, when set, opens the KV under the stores newTestStore
// makes, instead of Badger. postgres_test.go's TestMain sets it when
// FHIRGATE_STORE_TEST_KV=postgres, so the resource layer's tests run on
// PostgreSQL; tests of Badger itself use openTestKV and stay on Badger.
var OpenTestStoreKV func(testing.TB) KV

func newTestStore(t testing.TB) *Store {
	t.Helper()
	if OpenTestStoreKV != nil {
		return New(OpenTestStoreKV(t), Options{})
	}
	kv, _ := openTestKV(t)
	return New(kv, Options{})
}

func mustCreate[R Resource](t testing.TB, s *Store, r R) R {
	t.Helper()
	if err := s.Create(context.Background(), r, PutOptions{}); err != nil {
		t.Fatalf("creating %T: %v", r, err)
	}
	return r
}

func seedProject(t testing.TB, s *Store, name string) *Project {
	t.Helper()
	return mustCreate(t, s, &Project{Name: name})
}

func seedUser(t testing.TB, s *Store, email string) *User {
	t.Helper()
	return mustCreate(t, s, &User{Email: email})
}

func seedMembership(t testing.TB, s *Store, p *Project, u *User, externalID string) *ProjectMembership {
	t.Helper()
	return mustCreate(t, s, &ProjectMembership{
		Project:    Reference{Reference: "Project/" + p.ID},
		User:       Reference{Reference: "User/" + u.ID},
		ExternalID: externalID,
	})
}

func seedBot(t testing.TB, s *Store, p *Project, name string, ids ...Identifier) *Bot {
	t.Helper()
	return mustCreate(t, s, &Bot{base: Base{Meta: Meta{Project: p.ID}}, Name: name, Identifier: ids})
}

func toJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding %T: %v", v, err)
	}
	return string(b)
}

func wantErrIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

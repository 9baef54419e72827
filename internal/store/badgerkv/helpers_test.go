package badgerkv

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/fhirgate/fhirgate/internal/store"
)

// openTestKV opens a real Badger in a fresh temporary directory, closed
// when t ends.
func openTestKV(t testing.TB) (*KV, string) {
	t.Helper()
	dir := t.TempDir()
	kv, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("opening badger: %v", err)
	}
	t.Cleanup(func() {
		if err := kv.Close(); err != nil {
			t.Errorf("closing badger: %v", err)
		}
	})
	return kv, dir
}

// keysWithPrefixes returns every live key under the given prefixes with its
// expiry (Unix seconds, 0 = never), as Badger keeps it.
func keysWithPrefixes(t *testing.T, kv *KV, prefixes ...string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	err := kv.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := string(it.Item().Key())
			for _, p := range prefixes {
				if strings.HasPrefix(k, p) {
					out[k] = it.Item().ExpiresAt()
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustCreate[R store.Resource](t testing.TB, s *store.Store, r R) R {
	t.Helper()
	if err := s.Create(context.Background(), r, store.PutOptions{}); err != nil {
		t.Fatalf("creating %T: %v", r, err)
	}
	return r
}

func mustDelete(t testing.TB, s *store.Store, typ, id string) {
	t.Helper()
	if err := s.Delete(context.Background(), typ, id); err != nil {
		t.Fatalf("deleting %s/%s: %v", typ, id, err)
	}
}

func seedProject(t testing.TB, s *store.Store, name string) *store.Project {
	t.Helper()
	return mustCreate(t, s, &store.Project{Name: name})
}

func seedUser(t testing.TB, s *store.Store, email string) *store.User {
	t.Helper()
	return mustCreate(t, s, &store.User{Email: email})
}

func seedMembership(t testing.TB, s *store.Store, p *store.Project, u *store.User, externalID string) *store.ProjectMembership {
	t.Helper()
	return mustCreate(t, s, &store.ProjectMembership{
		Project:    store.Reference{Reference: "Project/" + p.ID},
		User:       store.Reference{Reference: "User/" + u.ID},
		ExternalID: externalID,
	})
}

func seedBot(t testing.TB, s *store.Store, p *store.Project, name string, ids ...store.Identifier) *store.Bot {
	t.Helper()
	b := &store.Bot{Name: name, Identifier: ids}
	b.Base().Meta.Project = p.ID
	return mustCreate(t, s, b)
}

func toJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding %T: %v", v, err)
	}
	return string(b)
}

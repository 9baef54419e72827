package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// keysWithPrefixes returns every live key under the given prefixes with its
// expiry (Unix seconds, 0 = never).
func keysWithPrefixes(t *testing.T, kv *Badger, prefixes ...string) map[string]uint64 {
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

func TestTTLAppliesToRecordAndIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kv, _ := openTestKV(t)
	s := New(kv, Options{})

	tests := []struct {
		name   string
		r      Resource
		prefix []string
	}{
		{
			name:   "Login",
			r:      &Login{base: Base{Meta: Meta{Project: "p1"}}, User: Reference{Reference: "User/u1"}},
			prefix: []string{"r/Login/", "i/Login."},
		},
		{
			name:   "AuditEvent",
			r:      &AuditEvent{Entity: []AuditEventEntity{{What: Reference{Reference: "Bot/b1"}}}},
			prefix: []string{"r/AuditEvent/", "i/AuditEvent."},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now()
			if err := s.Create(ctx, tc.r, PutOptions{TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			keys := keysWithPrefixes(t, kv, tc.prefix...)
			if len(keys) < 2 {
				t.Fatalf("expected a record and index keys, got %v", keys)
			}
			lo, hi := uint64(before.Add(time.Hour).Unix()), uint64(time.Now().Add(time.Hour).Unix())
			for k, exp := range keys {
				if exp < lo || exp > hi {
					t.Errorf("key %s expires at %d, want within [%d, %d]", k, exp, lo, hi)
				}
			}
		})
	}
}

func TestTTLExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kv, _ := openTestKV(t)
	s := New(kv, Options{})
	l := &Login{User: Reference{Reference: "User/u1"}}
	if err := s.Create(ctx, l, PutOptions{TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	// Badger's expiry has one-second granularity: poll until it passes
	// rather than sleeping a fixed time.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.Read(ctx, "Login", l.ID, &Login{})
		if errors.Is(err, ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("login did not expire")
		}
		time.Sleep(50 * time.Millisecond)
	}
	logins, err := s.List(ctx, "Login", Filter{User: "u1"})
	if err != nil || len(logins) != 0 {
		t.Fatalf("expired login still listed: %d, %v", len(logins), err)
	}
	if keys := keysWithPrefixes(t, kv, "i/Login."); len(keys) != 0 {
		t.Fatalf("index keys outlived the record: %v", keys)
	}
}

func TestReplacingWithTTLMovesIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kv, _ := openTestKV(t)
	s := New(kv, Options{})
	l := &Login{User: Reference{Reference: "User/u1"}}
	if err := s.Create(ctx, l, PutOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	l.User = Reference{Reference: "User/u2"}
	if _, err := s.Put(ctx, l, PutOptions{TTL: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	keys := keysWithPrefixes(t, kv, "i/Login.user/")
	if len(keys) != 1 {
		t.Fatalf("index keys = %v, want only u2's", keys)
	}
	for k, exp := range keys {
		if !strings.Contains(k, "/u2/") || exp < uint64(time.Now().Add(time.Hour+59*time.Minute).Unix()) {
			t.Fatalf("index key %s expires at %d", k, exp)
		}
	}
}

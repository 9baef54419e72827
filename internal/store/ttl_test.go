package store

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"
)

// expiryKV records the expiry each committed write gave its key (Unix
// seconds, 0 = never), so tests can check the TTLs the store asks of any KV.
type expiryKV struct {
	KV
	mu      sync.Mutex
	expires map[string]uint64
}

func newExpiryKV(kv KV) *expiryKV { return &expiryKV{KV: kv, expires: map[string]uint64{}} }

func (k *expiryKV) Update(ctx context.Context, fn func(Txn) error) error {
	var set map[string]uint64
	err := k.KV.Update(ctx, func(tx Txn) error {
		set = map[string]uint64{} // this attempt's writes only
		return fn(&expiryTxn{Txn: tx, set: set})
	})
	if err == nil {
		k.mu.Lock()
		maps.Copy(k.expires, set)
		k.mu.Unlock()
	}
	return err
}

type expiryTxn struct {
	Txn
	set map[string]uint64
}

func (t *expiryTxn) Set(key, value []byte, ttl time.Duration) error {
	if ttl > 0 {
		t.set[string(key)] = uint64(time.Now().Add(ttl).Unix())
	} else {
		t.set[string(key)] = 0
	}
	return t.Txn.Set(key, value, ttl)
}

// keysWithPrefixes returns every live key under the given prefixes with
// the expiry its last write gave it.
func keysWithPrefixes(t *testing.T, kv *expiryKV, prefixes ...string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	err := kv.View(context.Background(), func(tx Txn) error {
		for _, p := range prefixes {
			if err := tx.Scan([]byte(p), false, func(key, _ []byte) error {
				kv.mu.Lock()
				out[string(key)] = kv.expires[string(key)]
				kv.mu.Unlock()
				return nil
			}); err != nil {
				return err
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
	kv := newExpiryKV(newTestStore(t).KV())
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
	kv := newExpiryKV(newTestStore(t).KV())
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
	kv := newExpiryKV(newTestStore(t).KV())
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

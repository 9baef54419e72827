package tokens

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestVerifiedAccessTokenIsCached(t *testing.T) {
	e := newEnv(t, Options{})
	tok := e.access(t, time.Hour)
	first, err := e.svc.Verify(context.Background(), tok, KindAccess)
	if err != nil {
		t.Fatal(err)
	}
	checks := e.svc.sigChecks.Load()
	if checks != 1 {
		t.Fatalf("%d signature checks for the first verification", checks)
	}
	first.Subject = "mutated by the caller"
	for range 3 {
		c, err := e.svc.Verify(context.Background(), tok, KindAccess)
		if err != nil {
			t.Fatal(err)
		}
		if c.Subject != "user-1" {
			t.Fatalf("cache returned %q: callers share cached claims", c.Subject)
		}
	}
	if got := e.svc.sigChecks.Load(); got != checks {
		t.Fatalf("%d signature checks after cache hits, want %d", got, checks)
	}
}

func TestCacheNeverOutlivesTokenExpiry(t *testing.T) {
	e := newEnv(t, Options{})
	tok := e.access(t, time.Minute)
	if _, err := e.svc.Verify(context.Background(), tok, KindAccess); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(59 * time.Second)
	if _, err := e.svc.Verify(context.Background(), tok, KindAccess); err != nil {
		t.Fatalf("one second before exp: %v", err)
	}
	if e.svc.sigChecks.Load() != 1 {
		t.Fatal("second verification was not a cache hit")
	}
	e.clock.Advance(time.Second)
	_, err := e.svc.Verify(context.Background(), tok, KindAccess)
	wantReason(t, err, ReasonExpired)
}

func TestOnlyAccessTokensAreCached(t *testing.T) {
	e := newEnv(t, Options{})
	tok, _, err := e.svc.IssueRefresh(RefreshClaims{LoginID: "l", RefreshSecret: "s"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := e.svc.Verify(context.Background(), tok, KindRefresh); err != nil {
			t.Fatal(err)
		}
	}
	// A cached refresh token must not be mistaken for an access token.
	_, err = e.svc.Verify(context.Background(), tok, KindAccess)
	wantReason(t, err, ReasonType)
	if got := e.svc.sigChecks.Load(); got != 3 {
		t.Fatalf("%d signature checks, want 3", got)
	}
}

func TestCacheIsBounded(t *testing.T) {
	cases := []struct {
		name string
		size int
	}{
		{"smaller than the shard count", 5},
		{"default-like", 256},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{CacheSize: tc.size})
			for range 4 * tc.size {
				if _, err := e.svc.Verify(context.Background(), e.access(t, time.Hour), KindAccess); err != nil {
					t.Fatal(err)
				}
			}
			limit := max(tc.size, cacheShards) + cacheShards
			if n := e.svc.cache.len(); n == 0 || n > limit {
				t.Fatalf("cache holds %d entries, want 1..%d", n, limit)
			}
		})
	}
}

func TestCacheDisabled(t *testing.T) {
	e := newEnv(t, Options{CacheSize: -1})
	tok := e.access(t, time.Hour)
	for range 3 {
		if _, err := e.svc.Verify(context.Background(), tok, KindAccess); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.svc.sigChecks.Load(); got != 3 {
		t.Fatalf("%d signature checks, want 3", got)
	}
}

// Run with -race: verification, rotation and JWKS reads happen together.
func TestConcurrentVerifyRotateAndJWKS(t *testing.T) {
	e := newEnv(t, Options{CacheSize: 64})
	toks := make([]string, 16)
	for i := range toks {
		toks[i] = e.access(t, time.Hour)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				tok := toks[(g+i)%len(toks)]
				if _, err := e.svc.Verify(context.Background(), tok, KindAccess); err != nil {
					errs <- fmt.Errorf("goroutine %d: %w", g, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 3 {
			if _, err := e.svc.Rotate(context.Background()); err != nil {
				errs <- err
				return
			}
			_ = e.svc.JWKS()
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

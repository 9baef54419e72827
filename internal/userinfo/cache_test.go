package userinfo

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"
)

func TestSuccessfulAnswersAreCached(t *testing.T) {
	clk := newClock()
	p := newProvider(t, jsonHandler(`{"sub":"abc","email":"a@example.test","email_verified":true}`))
	c := New(Options{Now: clk.Now, DefaultCacheTTL: time.Minute})
	req := LookupRequest{URL: p.URL, Token: testToken, CacheKey: "client-a"}
	lookup := func(r LookupRequest) *Info {
		t.Helper()
		info, err := c.Lookup(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}

	first := lookup(req)
	first.Raw["sub"] = "mutated"
	*first.EmailVerified = false
	second := lookup(req)
	if p.calls.Load() != 1 {
		t.Fatalf("provider called %d times for two identical lookups", p.calls.Load())
	}
	if second.Raw["sub"] != "abc" || !*second.EmailVerified {
		t.Fatal("a caller's changes leaked into the cache")
	}

	steps := []struct {
		name      string
		advance   time.Duration
		req       LookupRequest
		wantCalls int64
	}{
		{"other client, same token", 0, LookupRequest{URL: p.URL, Token: testToken, CacheKey: "client-b"}, 2},
		{"other token", 0, LookupRequest{URL: p.URL, Token: testToken + "2", CacheKey: "client-a"}, 3},
		{"other URL", 0, LookupRequest{URL: p.URL + "/other", Token: testToken, CacheKey: "client-a"}, 4},
		{"still fresh", 59 * time.Second, req, 4},
		{"expired", time.Second, req, 5},
		{"cached again", 0, req, 5},
		{"request opts out", 0, LookupRequest{URL: p.URL, Token: testToken, CacheKey: "client-a", CacheTTL: -1}, 6},
		{"request TTL shorter", 0, LookupRequest{URL: p.URL, Token: "short", CacheKey: "client-a", CacheTTL: time.Second}, 7},
		{"request TTL over", 2 * time.Second, LookupRequest{URL: p.URL, Token: "short", CacheKey: "client-a", CacheTTL: time.Second}, 8},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			clk.Advance(s.advance)
			lookup(s.req)
			if got := p.calls.Load(); got != s.wantCalls {
				t.Fatalf("provider calls %d, want %d", got, s.wantCalls)
			}
		})
	}
	if st := c.Stats(); st.Hits != 3 || st.Calls != 8 || st.Misses != 8 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFailuresAreNotCached(t *testing.T) {
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    Kind
	}{
		{"rejected", statusHandler(401, nil), KindRejected},
		{"rate limited", statusHandler(429, nil), KindRateLimited},
		{"unavailable", statusHandler(503, nil), KindUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, tc.handler)
			c := New(Options{})
			for range 2 {
				_, err := c.Lookup(context.Background(), LookupRequest{URL: p.URL, Token: testToken})
				wantKind(t, err, tc.want)
			}
			if n := p.calls.Load(); n != 2 {
				t.Fatalf("provider called %d times, want 2", n)
			}
		})
	}
}

func TestCacheDisabledByDefaultTTL(t *testing.T) {
	p := newProvider(t, jsonHandler(`{"sub":"a"}`))
	c := New(Options{DefaultCacheTTL: -1})
	for range 2 {
		if _, err := c.Lookup(context.Background(), LookupRequest{URL: p.URL, Token: testToken}); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.calls.Load(); n != 2 {
		t.Fatalf("provider called %d times, want 2", n)
	}
}

func TestCacheIsBounded(t *testing.T) {
	p := newProvider(t, jsonHandler(`{"sub":"a"}`))
	c := New(Options{CacheSize: 10})
	for i := range 50 {
		tok := "token-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if _, err := c.Lookup(context.Background(), LookupRequest{URL: p.URL, Token: tok}); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.cache.len(); n != 10 {
		t.Fatalf("cache holds %d entries, want 10", n)
	}
}

// Fifty identical lookups arriving together make one provider call, with
// and without the cache (coalescing does not depend on it).
func TestConcurrentIdenticalLookupsShareOneCall(t *testing.T) {
	for _, ttl := range []time.Duration{0, -1} {
		t.Run("ttl "+ttl.String(), func(t *testing.T) {
			release := make(chan struct{})
			p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
				<-release
				jsonHandler(`{"sub":"shared"}`)(w, r)
			})
			c := New(Options{DefaultCacheTTL: ttl})
			const n = 50
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for range n {
				wg.Go(func() {
					info, err := c.Lookup(context.Background(), LookupRequest{URL: p.URL, Token: testToken, CacheKey: "c"})
					if err == nil && info.Sub != "shared" {
						t.Errorf("sub %q", info.Sub)
					}
					errs <- err
				})
			}
			// All fifty are waiting on the flight before the provider answers.
			waitFor(t, "all lookups to join", func() bool { return c.Stats().Misses == n })
			close(release)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := p.calls.Load(); got != 1 {
				t.Fatalf("provider called %d times", got)
			}
			if st := c.Stats(); st.Calls != 1 || st.Coalesced != n-1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// The caller that started a shared call going away must not fail the
// others, nor waste the answer.
func TestSharedCallSurvivesItsStarterLeaving(t *testing.T) {
	release := make(chan struct{})
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		jsonHandler(`{"sub":"survivor"}`)(w, r)
	})
	c := New(Options{})
	req := LookupRequest{URL: p.URL, Token: testToken, CacheKey: "c"}

	starterCtx, cancelStarter := context.WithCancel(context.Background())
	starterErr := make(chan error, 1)
	go func() {
		_, err := c.Lookup(starterCtx, req)
		starterErr <- err
	}()
	waitFor(t, "the provider call", func() bool { return p.calls.Load() == 1 })
	waiter := make(chan *Info, 1)
	go func() {
		info, err := c.Lookup(context.Background(), req)
		if err != nil {
			t.Error(err)
		}
		waiter <- info
	}()
	waitFor(t, "the second lookup to join", func() bool { return c.Stats().Misses == 2 })

	cancelStarter()
	wantKind(t, <-starterErr, KindUnavailable)
	close(release)
	if info := <-waiter; info == nil || info.Sub != "survivor" {
		t.Fatalf("waiter got %+v", info)
	}
	if _, err := c.Lookup(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("provider called %d times: the answer was not cached", n)
	}
}

func TestObserveSeesEachProviderCallOnce(t *testing.T) {
	var mu sync.Mutex
	var outcomes []string
	c := New(Options{Observe: func(d time.Duration, outcome string) {
		mu.Lock()
		defer mu.Unlock()
		if d < 0 {
			t.Errorf("negative duration %v", d)
		}
		outcomes = append(outcomes, outcome)
	}})
	cases := []struct {
		handler http.HandlerFunc
		want    string
	}{
		{jsonHandler(`{"sub":"a"}`), "ok"},
		{statusHandler(401, nil), "rejected"},
		{statusHandler(429, nil), "rate_limited"},
		{statusHandler(500, nil), "unavailable"},
	}
	for _, tc := range cases {
		p := newProvider(t, tc.handler)
		for range 2 { // the second ok lookup is a cache hit
			_, _ = c.Lookup(context.Background(), LookupRequest{URL: p.URL, Token: testToken})
		}
	}
	want := []string{"ok", "rejected", "rejected", "rate_limited", "rate_limited", "unavailable", "unavailable"}
	mu.Lock()
	defer mu.Unlock()
	if len(outcomes) != len(want) {
		t.Fatalf("outcomes %v, want %v", outcomes, want)
	}
	for i := range want {
		if outcomes[i] != want[i] {
			t.Fatalf("outcomes %v, want %v", outcomes, want)
		}
	}
}

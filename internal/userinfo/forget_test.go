package userinfo

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestForgetDropsTheCachedAnswer(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"email":"a@example.com"}`))
	}))
	defer srv.Close()
	c := New(Options{})
	req := LookupRequest{URL: srv.URL, Token: "tok", CacheKey: "client"}
	for range 2 {
		if _, err := c.Lookup(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("provider called %d times before Forget", calls.Load())
	}
	c.Forget(req)
	if _, err := c.Lookup(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 {
		t.Fatalf("provider called %d times after Forget", calls.Load())
	}
}

package userinfo

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

const benchBody = `{"sub":"248289761001","name":"Jane Doe","email":"janedoe@example.com","email_verified":true,"picture":"http://example.com/janedoe/me.jpg"}`

func benchProvider(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(benchBody))
	}))
	b.Cleanup(srv.Close)
	return srv
}

func BenchmarkLookupCacheHit(b *testing.B) {
	srv := benchProvider(b)
	c := New(Options{})
	req := LookupRequest{URL: srv.URL, Token: testToken, CacheKey: "client"}
	if _, err := c.Lookup(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Lookup(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkLookupUncached(b *testing.B) {
	srv := benchProvider(b)
	c := New(Options{DefaultCacheTTL: -1})
	req := LookupRequest{URL: srv.URL, Token: testToken, CacheKey: "client"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Lookup(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

package userinfo

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func jwtBody(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc([]byte(payload)) + "." + enc([]byte("not-checked"))
}

func TestLookupOutcomes(t *testing.T) {
	clk := newClock()
	big := `{"sub":"x","pad":"` + strings.Repeat("a", 2048) + `"}`
	cases := []struct {
		name           string
		handler        http.HandlerFunc
		wantKind       Kind // "" = success
		wantStatus     int
		wantRetryAfter time.Duration
		check          func(t *testing.T, info *Info)
	}{
		{
			name:    "JSON",
			handler: jsonHandler(`{"sub":"abc","email":"Ann@Example.test","email_verified":true,"name":"Ann"}`),
			check: func(t *testing.T, info *Info) {
				if info.Sub != "abc" || info.Email != "Ann@Example.test" || info.EmailVerified == nil || !*info.EmailVerified || info.Raw["name"] != "Ann" {
					t.Fatalf("info %+v", info)
				}
			},
		},
		{
			name: "JWT body",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/jwt")
				_, _ = w.Write([]byte(jwtBody(`{"sub":"jwt-sub","email":"j@example.test"}`)))
			},
			check: func(t *testing.T, info *Info) {
				if info.Sub != "jwt-sub" || info.Email != "j@example.test" || info.EmailVerified != nil {
					t.Fatalf("info %+v", info)
				}
			},
		},
		{
			name:    "email_verified false is surfaced",
			handler: jsonHandler(`{"sub":"a","email":"a@example.test","email_verified":false}`),
			check: func(t *testing.T, info *Info) {
				if info.EmailVerified == nil || *info.EmailVerified {
					t.Fatalf("EmailVerified %v", info.EmailVerified)
				}
			},
		},
		{
			name:    "email_verified as a string (Cognito)",
			handler: jsonHandler(`{"sub":"a","email_verified":"false"}`),
			check: func(t *testing.T, info *Info) {
				if info.EmailVerified == nil || *info.EmailVerified {
					t.Fatalf("EmailVerified %v", info.EmailVerified)
				}
			},
		},
		{
			name:    "numeric sub",
			handler: jsonHandler(`{"sub":12345678901234567890}`),
			check: func(t *testing.T, info *Info) {
				if info.Sub != "12345678901234567890" {
					t.Fatalf("sub %q", info.Sub)
				}
			},
		},
		{
			name: "+json media type",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/userinfo+json")
				_, _ = w.Write([]byte(`{"sub":"s"}`))
			},
			check: func(t *testing.T, info *Info) {
				if info.Sub != "s" {
					t.Fatalf("info %+v", info)
				}
			},
		},
		{
			name: "JSON mislabelled text/plain",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = w.Write([]byte(` {"sub":"s"} `))
			},
			check: func(t *testing.T, info *Info) {
				if info.Sub != "s" {
					t.Fatalf("info %+v", info)
				}
			},
		},
		{
			name: "JSON without a content type",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header()["Content-Type"] = nil // stop net/http sniffing one
				_, _ = w.Write([]byte(`{"sub":"s"}`))
			},
			check: func(t *testing.T, info *Info) {
				if info.Sub != "s" {
					t.Fatalf("info %+v", info)
				}
			},
		},
		{name: "401", handler: statusHandler(401, nil), wantKind: KindRejected, wantStatus: 401},
		{name: "403", handler: statusHandler(403, nil), wantKind: KindRejected, wantStatus: 403},
		{name: "400", handler: statusHandler(400, nil), wantKind: KindRejected, wantStatus: 400},
		{name: "429 with Retry-After seconds", handler: statusHandler(429, map[string]string{"Retry-After": "7"}), wantKind: KindRateLimited, wantStatus: 429, wantRetryAfter: 7 * time.Second},
		{name: "429 with Retry-After date", handler: statusHandler(429, map[string]string{"Retry-After": clk.Now().Add(30 * time.Second).Format(http.TimeFormat)}), wantKind: KindRateLimited, wantStatus: 429, wantRetryAfter: 30 * time.Second},
		{name: "429 with absurd Retry-After", handler: statusHandler(429, map[string]string{"Retry-After": "99999999"}), wantKind: KindRateLimited, wantStatus: 429, wantRetryAfter: time.Hour},
		{name: "429 without Retry-After", handler: statusHandler(429, nil), wantKind: KindRateLimited, wantStatus: 429},
		{name: "500", handler: statusHandler(500, nil), wantKind: KindUnavailable, wantStatus: 500},
		{name: "502", handler: statusHandler(502, nil), wantKind: KindUnavailable, wantStatus: 502},
		{name: "503 with Retry-After", handler: statusHandler(503, map[string]string{"Retry-After": "12"}), wantKind: KindUnavailable, wantStatus: 503, wantRetryAfter: 12 * time.Second},
		{name: "404 (misconfigured URL)", handler: statusHandler(404, nil), wantKind: KindUnavailable, wantStatus: 404},
		{
			name: "HTML body",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				_, _ = w.Write([]byte("<html><body>Sign in</body></html>"))
			},
			wantKind: KindUnavailable, wantStatus: 200,
		},
		{
			name: "HTML labelled as JSON",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte("<html></html>"))
			},
			wantKind: KindUnavailable, wantStatus: 200,
		},
		{name: "empty body", handler: jsonHandler(""), wantKind: KindUnavailable, wantStatus: 200},
		{name: "204 no content", handler: statusHandler(204, nil), wantKind: KindUnavailable, wantStatus: 204},
		{name: "JSON array", handler: jsonHandler(`[{"sub":"a"}]`), wantKind: KindUnavailable, wantStatus: 200},
		{name: "JSON null", handler: jsonHandler(`null`), wantKind: KindUnavailable, wantStatus: 200},
		{name: "data after the object", handler: jsonHandler(`{"sub":"a"}{"sub":"b"}`), wantKind: KindUnavailable, wantStatus: 200},
		{name: "oversized body with Content-Length", handler: jsonHandler(big), wantKind: KindUnavailable, wantStatus: 200},
		{
			name: "oversized streamed body",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				for range 4 {
					_, _ = w.Write([]byte(big[:600]))
					w.(http.Flusher).Flush()
				}
			},
			wantKind: KindUnavailable, wantStatus: 200,
		},
		{
			name: "encrypted JWT",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/jwt")
				_, _ = w.Write([]byte("a.b.c.d.e"))
			},
			wantKind: KindUnavailable, wantStatus: 200,
		},
		{
			name: "JWT with a garbage payload",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/jwt")
				_, _ = w.Write([]byte("aaa.!!!.ccc"))
			},
			wantKind: KindUnavailable, wantStatus: 200,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, tc.handler)
			c := New(Options{MaxBody: 1024, Now: clk.Now})
			info, err := c.Lookup(context.Background(), LookupRequest{URL: p.URL + "/userinfo", Token: testToken, CacheKey: "client"})
			if p.calls.Load() != 1 {
				t.Fatalf("provider called %d times", p.calls.Load())
			}
			h := p.headers(0)
			if h.Get("Authorization") != "Bearer "+testToken || h.Get("Accept") != "application/json" {
				t.Fatalf("request headers %v", h)
			}
			if tc.wantKind == "" {
				if err != nil {
					t.Fatalf("Lookup: %v", err)
				}
				tc.check(t, info)
				return
			}
			if info != nil {
				t.Fatalf("info %+v returned with an error", info)
			}
			e := wantKind(t, err, tc.wantKind)
			if e.Status != tc.wantStatus || e.RetryAfter != tc.wantRetryAfter {
				t.Fatalf("status %d retry-after %v, want %d %v (%v)", e.Status, e.RetryAfter, tc.wantStatus, tc.wantRetryAfter, err)
			}
		})
	}
}

func TestLookupIsBoundedInTime(t *testing.T) {
	const timeout = 200 * time.Millisecond
	cases := []struct {
		name    string
		handler func(stop <-chan struct{}) http.HandlerFunc
	}{
		{
			name: "headers never come",
			handler: func(stop <-chan struct{}) http.HandlerFunc {
				return func(_ http.ResponseWriter, r *http.Request) {
					select {
					case <-r.Context().Done():
					case <-stop:
					}
				}
			},
		},
		{
			name: "body hangs after the headers",
			handler: func(stop <-chan struct{}) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Content-Length", "100")
					_, _ = w.Write([]byte(`{"sub":`))
					w.(http.Flusher).Flush()
					select {
					case <-r.Context().Done():
					case <-stop:
					}
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, tc.handler(hang(t)))
			c := New(Options{})
			start := time.Now()
			_, err := c.Lookup(context.Background(), LookupRequest{URL: p.URL, Token: testToken, Timeout: timeout})
			elapsed := time.Since(start)
			wantKind(t, err, KindUnavailable)
			// Generous: the point is that it returns at all, the provider
			// would hang until the test ends.
			if elapsed > 15*timeout {
				t.Fatalf("returned after %v with a %v timeout", elapsed, timeout)
			}
		})
	}
}

func TestLookupConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := New(Options{})
	_, err = c.Lookup(context.Background(), LookupRequest{URL: "http://" + addr + "/userinfo", Token: testToken})
	wantKind(t, err, KindUnavailable)
}

func TestLookupRefusesBadInputWithoutCalling(t *testing.T) {
	p := newProvider(t, jsonHandler(`{"sub":"a"}`))
	cases := []struct {
		name  string
		url   string
		token string
		want  Kind
	}{
		{"ftp scheme", "ftp://" + p.Listener.Addr().String(), testToken, KindUnavailable},
		{"javascript scheme", "javascript:alert(1)", testToken, KindUnavailable},
		{"relative URL", "/userinfo", testToken, KindUnavailable},
		{"empty URL", "", testToken, KindUnavailable},
		{"unparsable URL", "http://[::1", testToken, KindUnavailable},
		{"credentials in URL", "http://u:p@" + p.Listener.Addr().String(), testToken, KindUnavailable},
		{"empty token", p.URL, "", KindRejected},
		{"token with a newline", p.URL, "abc\r\nX-Evil: 1", KindRejected},
		{"token with a space", p.URL, "abc def", KindRejected},
		{"token with non-ASCII", p.URL, "abcé", KindRejected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Options{})
			_, err := c.Lookup(context.Background(), LookupRequest{URL: tc.url, Token: tc.token})
			wantKind(t, err, tc.want)
		})
	}
	if n := p.calls.Load(); n != 0 {
		t.Fatalf("provider called %d times", n)
	}
}

func TestCallerCancellationReturnsPromptly(t *testing.T) {
	stop := hang(t)
	p := newProvider(t, func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	})
	c := New(Options{DefaultTimeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		waitFor(t, "the provider call", func() bool { return p.calls.Load() == 1 })
		cancel()
	}()
	_, err := c.Lookup(ctx, LookupRequest{URL: p.URL, Token: testToken})
	wantKind(t, err, KindUnavailable)
}

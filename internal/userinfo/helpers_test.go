package userinfo

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/fakeclock"
)

const testToken = "provider-access-token.abc123"

// provider is a userinfo endpoint on 127.0.0.1 that counts and records calls.
type provider struct {
	*httptest.Server
	calls atomic.Int64
	mu    sync.Mutex
	reqs  []http.Header
	paths []string
}

func newProvider(t *testing.T, h http.HandlerFunc) *provider {
	t.Helper()
	p := &provider{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.calls.Add(1)
		p.mu.Lock()
		p.reqs = append(p.reqs, r.Header.Clone())
		p.paths = append(p.paths, r.Method+" "+r.URL.Path)
		p.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(func() {
		// Cut live connections first: a detached lookup may still be
		// waiting on a handler that hangs on purpose.
		p.CloseClientConnections()
		p.Close()
	})
	return p
}

func (p *provider) headers(i int) http.Header {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reqs[i]
}

func jsonHandler(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write([]byte(body))
	}
}

func statusHandler(status int, header map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":"nope"}`))
	}
}

// hang blocks until the client goes away or the test ends.
func hang(t *testing.T) <-chan struct{} {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	return stop
}

// clock is the Now seam.
type clock = fakeclock.Clock

var newClock = fakeclock.New

func wantKind(t *testing.T, err error, want Kind) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("succeeded, want %s", want)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not *userinfo.Error", err)
	}
	if e.Kind != want {
		t.Fatalf("kind %s (%v), want %s", e.Kind, err, want)
	}
	if strings.Contains(err.Error(), testToken) {
		t.Fatalf("error %q contains the token", err)
	}
	return e
}

// waitFor polls cond; it is a synchronisation aid, not a timing assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

package oauth

import (
	"context"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
)

func TestParseLifetime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"3600s", time.Hour, true},
		{"2w", 14 * 24 * time.Hour, true},
		{"1y", 365 * 24 * time.Hour, true},
		{"0s", 0, false},
		{"101y", 0, false},
		{"1h30m", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := parseLifetime(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("parseLifetime(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestClientLifetimesAreCappedAtTheTokenMaximum(t *testing.T) {
	e := newEnv(t)
	c, err := store.Get[store.ClientApplication](context.Background(), e.st, "web")
	if err != nil {
		t.Fatal(err)
	}
	c.AccessTokenLifetime, c.RefreshTokenLifetime = "30m", "1y"
	if _, err := e.st.Put(context.Background(), c, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	rec := e.exchange("web", "alice")
	if rec.Code != 200 {
		fail(t, rec, "a client with a refresh lifetime beyond the token maximum must still sign in")
	}
	if got := decode(t, rec)["expires_in"].(float64); got != 1800 {
		t.Fatalf("expires_in %v, want the client's 30m", got)
	}
	claims, err := e.tok.Verify(context.Background(), decode(t, rec)["refresh_token"].(string), tokens.KindRefresh)
	if err != nil {
		t.Fatal(err)
	}
	if life := claims.ExpiresAt.Sub(claims.IssuedAt); life != e.tok.MaxTokenLifetime() {
		t.Fatalf("refresh lifetime %v, want the cap %v", life, e.tok.MaxTokenLifetime())
	}
}

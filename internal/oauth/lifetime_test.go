package oauth

import (
	"testing"
	"time"
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

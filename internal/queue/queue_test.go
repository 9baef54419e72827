package queue

import (
	"testing"
	"time"
)

func TestParseTickKey(t *testing.T) {
	tick := time.Date(2026, 11, 25, 21, 30, 0, 0, time.UTC)
	if got, ok := ParseTickKey(TickKey(tick)); !ok || !got.Equal(tick) {
		t.Fatalf("ParseTickKey(TickKey(%s)) = %s, %v", tick, got, ok)
	}
	for _, key := range []string{"", "bot@2026-11-25T21:30:00Z", "tick:soon"} {
		if _, ok := ParseTickKey(key); ok {
			t.Errorf("ParseTickKey(%q) accepted it", key)
		}
	}
}

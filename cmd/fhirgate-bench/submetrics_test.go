package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// scrape is Caddy's /metrics as the subscription engine leaves it, with
// other metrics around.
func scrape(queued, delivered float64, buckets ...float64) string {
	var b strings.Builder
	b.WriteString("# HELP caddy_fhirgate_subscription_events_total Subscription work by event.\n")
	b.WriteString("# TYPE caddy_fhirgate_subscription_events_total counter\n")
	b.WriteString(`caddy_fhirgate_subscription_events_total{event="queued"} ` + ftoa(queued) + "\n")
	b.WriteString(`caddy_fhirgate_subscription_events_total{event="delivered"} ` + ftoa(delivered) + "\n")
	b.WriteString(`caddy_fhirgate_token_requests_total{result="ok"} 12` + "\n")
	les := []string{"0.005", "0.01", "0.02", "+Inf"}
	for i, c := range buckets {
		b.WriteString(`caddy_fhirgate_subscription_lag_seconds_bucket{le="` + les[i] + `"} ` + ftoa(c) + "\n")
	}
	b.WriteString("caddy_fhirgate_subscription_lag_seconds_sum 1.5\n")
	b.WriteString("caddy_fhirgate_subscription_lag_seconds_count " + ftoa(buckets[len(buckets)-1]) + "\n")
	return b.String()
}

func ftoa(f float64) string { b, _ := json.Marshal(f); return string(b) }

func TestSubscriptionMetrics(t *testing.T) {
	before, err := parseSubscriptionMetrics(strings.NewReader(scrape(10, 40, 10, 20, 40, 50)))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseSubscriptionMetrics(strings.NewReader(scrape(30, 140, 10, 60, 120, 150)))
	if err != nil {
		t.Fatal(err)
	}
	d := after.since(before)
	if d.Events["queued"] != 20 || d.finished() != 100 || d.lagCount() != 100 {
		t.Fatalf("difference %+v", d)
	}
	// The 100 lags since: none up to 5 ms, 40 in (5, 10] ms, 40 in (10, 20], 20 above.
	if v, lo, hi := d.lagQuantile(0.5); math.Abs(v-0.0125) > 1e-9 || lo != 0.01 || hi != 0.02 {
		t.Errorf("p50 = %v in (%v, %v], want 0.0125 in (0.01, 0.02]", v, lo, hi)
	}
	if v, _, _ := d.lagQuantile(0.2); math.Abs(v-0.0075) > 1e-9 {
		t.Errorf("p20 = %v, want 0.0075", v)
	}
	if v, lo, _ := d.lagQuantile(0.99); !math.IsInf(v, 1) || lo != 0.02 {
		t.Errorf("p99 = %v above %v, want +Inf above the last bound", v, lo)
	}
	sum := d.add(d)
	if sum.lagCount() != 200 || sum.Events["delivered"] != 200 {
		t.Errorf("sum %+v", sum)
	}
	if secondsDuration(math.Inf(1)) != math.MaxInt64 || secondsDuration(0.25) != 250*time.Millisecond {
		t.Error("secondsDuration")
	}
	if _, err := parseSubscriptionMetrics(strings.NewReader("caddy_fhirgate_token_requests_total{result=\"ok\"} 12\n")); err == nil {
		t.Error("metrics without the lag histogram parsed")
	}
}

func TestOpenLoopSchedule(t *testing.T) {
	start := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	run := &loadRun{start: start, rate: 200}
	for seq, want := range map[uint64]time.Duration{0: 0, 1: 5 * time.Millisecond, 200: time.Second, 1000: 5 * time.Second} {
		if got := run.due(seq).Sub(start); got != want {
			t.Errorf("request %d due at +%s, want +%s", seq, got, want)
		}
	}
	if _, err := runLoad(t.Context(), loadSpec{Requests: []requestSpec{{URL: "http://127.0.0.1:1/"}}, Concurrency: 1, Rate: -1, Duration: duration(time.Second)}); err == nil {
		t.Error("a negative rate was accepted")
	}
}

func TestCreatedPatient(t *testing.T) {
	var p struct {
		ResourceType string `json:"resourceType"`
		ID           string `json:"id"`
		Meta         struct {
			VersionID   string `json:"versionId"`
			LastUpdated string `json:"lastUpdated"`
		} `json:"meta"`
		Name []any `json:"name"`
	}
	if err := json.Unmarshal(createdPatient("c7"), &p); err != nil {
		t.Fatal(err)
	}
	if p.ResourceType != "Patient" || p.ID != "c7" || p.Meta.VersionID != "1" || p.Meta.LastUpdated == "" || len(p.Name) != 2 {
		t.Errorf("created %+v", p)
	}
}

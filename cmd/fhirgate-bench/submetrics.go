package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Metric names scenario 12 reads from Caddy's admin /metrics.
const (
	subscriptionEventsMetric = "caddy_fhirgate_subscription_events_total"
	subscriptionLagMetric    = "caddy_fhirgate_subscription_lag_seconds"
)

// subscriptionMetrics are fhirgate's subscription counters at one moment,
// or the difference between two moments (since).
type subscriptionMetrics struct {
	// Events counts the engine's events by kind (queued, delivered,
	// failed, retried, dropped, lost).
	Events map[string]float64
	// Lag is the lag histogram: cumulative counts by upper bound in
	// seconds, in increasing order, the last +Inf.
	Lag []lagBucket
}

type lagBucket struct {
	le    float64
	count float64
}

// subscriptionMetrics scrapes Caddy's metrics endpoint.
func (p *caddyProc) subscriptionMetrics(ctx context.Context) (subscriptionMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.sites.admin+"/metrics", nil)
	if err != nil {
		return subscriptionMetrics{}, fmt.Errorf("reading metrics: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return subscriptionMetrics{}, fmt.Errorf("reading metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return subscriptionMetrics{}, fmt.Errorf("reading metrics: HTTP %d", resp.StatusCode)
	}
	return parseSubscriptionMetrics(resp.Body)
}

// parseSubscriptionMetrics reads the two subscription metrics out of the
// Prometheus text format. A missing lag histogram is an error: the Caddy
// has no subscription engine.
func parseSubscriptionMetrics(r io.Reader) (subscriptionMetrics, error) {
	m := subscriptionMetrics{Events: map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return m, fmt.Errorf("metric %s: value %q: %w", name, value, err)
		}
		switch name {
		case subscriptionEventsMetric:
			if ev, ok := label(labels, "event"); ok {
				m.Events[ev] = v
			}
		case subscriptionLagMetric + "_bucket":
			le, ok := label(labels, "le")
			if !ok {
				continue
			}
			bound, err := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
			if err != nil {
				return m, fmt.Errorf("metric %s: bound %q: %w", name, le, err)
			}
			m.Lag = append(m.Lag, lagBucket{le: bound, count: v})
		}
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("reading metrics: %w", err)
	}
	if len(m.Lag) == 0 {
		return m, fmt.Errorf("no %s in Caddy's metrics", subscriptionLagMetric)
	}
	slices.SortFunc(m.Lag, func(a, b lagBucket) int {
		switch {
		case a.le < b.le:
			return -1
		case a.le > b.le:
			return 1
		}
		return 0
	})
	if !math.IsInf(m.Lag[len(m.Lag)-1].le, 1) {
		return m, fmt.Errorf("%s has no +Inf bucket", subscriptionLagMetric)
	}
	return m, nil
}

// label returns the value of label name in `a="x",b="y"`.
func label(labels, name string) (string, bool) {
	for l := range strings.SplitSeq(labels, ",") {
		k, v, ok := strings.Cut(l, "=")
		if ok && k == name {
			return strings.Trim(v, `"`), true
		}
	}
	return "", false
}

// since is m minus an earlier scrape of the same process.
func (m subscriptionMetrics) since(before subscriptionMetrics) subscriptionMetrics {
	d := subscriptionMetrics{Events: map[string]float64{}, Lag: slices.Clone(m.Lag)}
	for k, v := range m.Events {
		d.Events[k] = v - before.Events[k]
	}
	for i := range d.Lag {
		if i < len(before.Lag) && before.Lag[i].le == d.Lag[i].le {
			d.Lag[i].count -= before.Lag[i].count
		}
	}
	return d
}

// add sums two differences (the segments of one side).
func (m subscriptionMetrics) add(o subscriptionMetrics) subscriptionMetrics {
	if m.Events == nil {
		return o
	}
	d := subscriptionMetrics{Events: map[string]float64{}, Lag: slices.Clone(m.Lag)}
	for k, v := range m.Events {
		d.Events[k] = v
	}
	for k, v := range o.Events {
		d.Events[k] += v
	}
	for i := range d.Lag {
		if i < len(o.Lag) && o.Lag[i].le == d.Lag[i].le {
			d.Lag[i].count += o.Lag[i].count
		}
	}
	return d
}

// lagCount is how many lags were observed.
func (m subscriptionMetrics) lagCount() float64 {
	if len(m.Lag) == 0 {
		return 0
	}
	return m.Lag[len(m.Lag)-1].count
}

// lagQuantile is the q-quantile of the lag in seconds, interpolated
// linearly within its bucket as Prometheus's histogram_quantile does, and
// the bucket's bounds; a quantile in the +Inf bucket is +Inf.
func (m subscriptionMetrics) lagQuantile(q float64) (v, lower, upper float64) {
	total := m.lagCount()
	if total == 0 {
		return 0, 0, 0
	}
	rank := q * total
	prevLe, prevCount := 0.0, 0.0
	for _, b := range m.Lag {
		if b.count >= rank && b.count > prevCount {
			if math.IsInf(b.le, 1) {
				return math.Inf(1), prevLe, b.le
			}
			return prevLe + (b.le-prevLe)*(rank-prevCount)/(b.count-prevCount), prevLe, b.le
		}
		prevLe, prevCount = b.le, b.count
	}
	return math.Inf(1), prevLe, math.Inf(1)
}

// finished is how many deliveries ended: delivered, failed (a bot that
// ran and failed) or dropped.
func (m subscriptionMetrics) finished() float64 {
	return m.Events["delivered"] + m.Events["failed"] + m.Events["dropped"]
}

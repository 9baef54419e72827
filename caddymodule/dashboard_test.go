package caddymodule

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestGrafanaDashboardMatchesMetrics holds docs/grafana-dashboard.json to
// the metrics fhirgate exports: every fhirgate metric a panel queries
// exists (a histogram through its _bucket, _sum or _count series), and
// every metric exported is charted.
func TestGrafanaDashboardMatchesMetrics(t *testing.T) {
	raw, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "query") {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dash)
	if len(exprs) == 0 {
		t.Fatal("no queries found: the test is not reading the dashboard")
	}

	exported := map[string]bool{} // name -> is a histogram
	for _, c := range collectors {
		descs := make(chan *prometheus.Desc, 4)
		c.Describe(descs)
		close(descs)
		_, isHistogram := c.(prometheus.Histogram)
		if _, vec := c.(*prometheus.HistogramVec); vec {
			isHistogram = true
		}
		for d := range descs {
			name := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(d.String())[1]
			exported[name] = isHistogram
		}
	}
	charted := map[string]bool{}
	for _, e := range exprs {
		for _, m := range regexp.MustCompile(`caddy_fhirgate_[a-z0-9_]+`).FindAllString(e, -1) {
			name := m
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(m, suffix); ok && exported[base] {
					name = base
				}
			}
			hist, ok := exported[name]
			switch {
			case !ok:
				t.Errorf("the dashboard queries %s, which fhirgate does not export", m)
			case hist && name == m:
				t.Errorf("the dashboard queries the histogram %s without _bucket, _sum or _count", m)
			}
			charted[name] = true
		}
	}
	var missing []string
	for name := range exported {
		if !charted[name] {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("no dashboard panel charts %v", missing)
	}
}

package main

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

func TestHistogramQuantiles(t *testing.T) {
	tests := []struct {
		name    string
		samples []time.Duration
		q       float64
		want    time.Duration
	}{
		{"empty is zero", nil, 0.5, 0},
		{"single sample is every quantile", []time.Duration{700 * time.Microsecond}, 0.99, 700 * time.Microsecond},
		{"median of 1..100 ms", msRange(1, 100), 0.50, 50 * time.Millisecond},
		{"p99 of 1..100 ms", msRange(1, 100), 0.99, 99 * time.Millisecond},
		{"p100 is the max", msRange(1, 100), 1, 100 * time.Millisecond},
		{"small values are exact", []time.Duration{1, 2, 3, 4}, 0.5, 2},
		{"one slow outlier sets p99 of 100", append(repeat(time.Millisecond, 98), time.Second, time.Second), 0.99, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHistogram()
			for _, s := range tt.samples {
				h.record(s)
			}
			got := h.quantile(tt.q)
			// Buckets are 1/128 wide relative to the value.
			if diff := math.Abs(float64(got - tt.want)); diff > float64(tt.want)/128+1 {
				t.Errorf("quantile(%v) = %v, want %v (±0.8%%)", tt.q, got, tt.want)
			}
		})
	}
}

func msRange(from, to int) []time.Duration {
	var out []time.Duration
	for i := from; i <= to; i++ {
		out = append(out, time.Duration(i)*time.Millisecond)
	}
	return out
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestHistogramMergeKeepsEverySample(t *testing.T) {
	a, b := newHistogram(), newHistogram()
	for _, d := range msRange(1, 50) {
		a.record(d)
	}
	for _, d := range msRange(51, 100) {
		b.record(d)
	}
	a.merge(b)
	if a.count() != 100 || a.min != time.Millisecond || a.max != 100*time.Millisecond {
		t.Fatalf("merged count %d min %v max %v", a.count(), a.min, a.max)
	}
	if got := a.mean(); got != 50500*time.Microsecond {
		t.Errorf("mean = %v, want 50.5ms", got)
	}
}

func TestBucketsCoverEveryValueOnce(t *testing.T) {
	tests := []struct {
		name string
		v    uint64
	}{
		{"zero", 0}, {"last exact", subBuckets - 1}, {"first log bucket", subBuckets},
		{"power of two", 1 << 20}, {"just below a power of two", 1<<20 - 1},
		{"an hour in ns", uint64(time.Hour)}, {"max int64", math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := bucketOf(tt.v)
			if i < 0 || i >= numBuckets {
				t.Fatalf("bucket %d out of range", i)
			}
			lo, hi := bucketBounds(i)
			if tt.v < lo || tt.v > hi {
				t.Errorf("value %d in bucket %d = [%d, %d]", tt.v, i, lo, hi)
			}
			if i+1 < numBuckets {
				if next, _ := bucketBounds(i + 1); next != hi+1 {
					t.Errorf("bucket %d ends at %d but the next starts at %d", i, hi, next)
				}
			}
		})
	}
}

func TestTemplateRender(t *testing.T) {
	tests := []struct {
		name string
		tmpl string
		seq  uint64
		want string
		dyn  bool
	}{
		{"plain text", "subject_token=abc", 7, "subject_token=abc", false},
		{"sequence", "bt.1.x-{seq}", 42, "bt.1.x-42", true},
		{"modulus", "bt.{seqmod:64}.x", 130, "bt.2.x", true},
		{"spread small store", "{spread:256:100}", 255, "99", true},
		{"spread large store", "{spread:256:100000}", 1, "390", true},
		{"spread wraps with the modulus", "{spread:10:10000}", 13, "3000", true},
		{"unknown braces are literal", `{"a":{seq}}`, 5, `{"a":5}`, true},
		{"unclosed brace", "a{seq", 1, "a{seq", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm, err := parseTemplate(tt.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			if got := tm.render(tt.seq); got != tt.want {
				t.Errorf("render(%d) = %q, want %q", tt.seq, got, tt.want)
			}
			if fixed := tm.parts == nil; fixed == tt.dyn {
				t.Errorf("fixed text = %v, want %v", fixed, !tt.dyn)
			}
		})
	}
}

func TestTemplateRejectsBadPlaceholders(t *testing.T) {
	for _, tmpl := range []string{"{seqmod:0}", "{seqmod:x}", "{spread:0:10}", "{spread:10}", "{spread:a:b}"} {
		t.Run(tmpl, func(t *testing.T) {
			if _, err := parseTemplate(tmpl); err == nil {
				t.Errorf("parseTemplate(%q) succeeded", tmpl)
			}
		})
	}
}

func TestParseLoadResult(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		wantErr string
		want    loadResult
	}{
		{
			name: "complete result",
			out:  `{"concurrency":32,"requests":1000,"seconds":2,"throughput_per_s":500,"p50_ms":1.5,"p99_ms":9,"non_2xx":3,"transport_errors":1,"status":{"200":997,"500":3}}`,
			want: loadResult{Concurrency: 32, Requests: 1000, Seconds: 2, Throughput: 500, P50Ms: 1.5, P99Ms: 9, Non2xx: 3, TransportErrors: 1},
		},
		{name: "not JSON", out: "panic: boom", wantErr: "parsing loadgen output"},
		{name: "unknown field", out: `{"concurrency":1,"status":{},"rps":5}`, wantErr: "unknown field"},
		{name: "empty object", out: `{}`, wantErr: "not a load result"},
		{name: "two results", out: `{"concurrency":1,"status":{}} {"concurrency":1,"status":{}}`, wantErr: "trailing data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got loadResult
			err := parseLoadResult([]byte(tt.out), &got)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Throughput != tt.want.Throughput || got.P99Ms != tt.want.P99Ms || got.errors() != 4 || got.Status["500"] != 3 {
				t.Errorf("got %+v", got)
			}
		})
	}
}

func TestVerdicts(t *testing.T) {
	tests := []struct {
		name          string
		value         float64
		op            string
		target        float64
		want          string
		wantFormatted string
	}{
		{"ratio above target", 0.93, ">=", 0.90, verdictPass, "0.93 ≥ 0.90"},
		{"ratio exactly at target", 0.90, ">=", 0.90, verdictPass, "0.90 ≥ 0.90"},
		{"ratio below target", 0.58, ">=", 0.90, verdictFail, "0.58 ≥ 0.90"},
		{"latency under limit", 0.2, "<=", 0.5, verdictPass, "0.20 ≤ 0.50"},
		{"latency over limit", 0.7, "<=", 0.5, verdictFail, "0.70 ≤ 0.50"},
		{"unknown operator", 1, "==", 1, verdictNA, "1.00 == 1.00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCheck(tt.name, tt.value, tt.op, tt.target, "")
			if c.Verdict != tt.want {
				t.Errorf("verdict = %s, want %s", c.Verdict, tt.want)
			}
			if got := c.row("1a")[6]; got != tt.wantFormatted {
				t.Errorf("table cell = %q, want %q", got, tt.wantFormatted)
			}
		})
	}
}

func TestRatio(t *testing.T) {
	tests := []struct {
		name string
		a, b float64
		want float64
	}{
		{"gated over plain", 4500, 5000, 0.9},
		{"nothing measured is zero, not a division by zero", 100, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ratio(tt.a, tt.b); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("ratio(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestFailedRequestsCountOnlyRunsThatRan(t *testing.T) {
	rep := &report{Scenarios: []*scenario{
		{ID: 1, Measurements: []*measurement{{Load: &loadResult{Non2xx: 2}}, {Load: &loadResult{TransportErrors: 1}}}},
		{ID: 3, Measurements: []*measurement{{Unavailable: "$execute answered HTTP 404"}}},
		{ID: 3, Measurements: []*measurement{{Load: &loadResult{Non2xx: 7, Throttled: 7}}}},
		{ID: 4, Measurements: []*measurement{{Value: 170, Unit: "MB/s"}}},
	}}
	if got := rep.failedRequests(); got != 3 {
		t.Errorf("failedRequests = %d, want 3", got)
	}
	if code := exitCode(rep, nil); code != 1 {
		t.Errorf("exit code with failed requests = %d, want 1", code)
	}
	missed := &report{Scenarios: []*scenario{{ID: 1, Checks: []*check{newCheck("ratio", 0.5, ">=", 0.9, "")}}}}
	if code := exitCode(missed, nil); code != 0 {
		t.Errorf("exit code for a missed target = %d, want 0", code)
	}
}

func TestExecuteUnavailable(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   string // substring; "" means available
	}{
		{"echo", 200, `{"b":2,"a":1}`, ""},
		{"echo with other spacing", 200, "{ \"a\": 1, \"b\": 2 }", ""},
		{"not implemented yet", 404, `{"resourceType":"OperationOutcome"}`, "HTTP 404"},
		{"unauthorized", 401, "", "HTTP 401"},
		{"wrong answer", 200, `{"a":1}`, "not the echo"},
		{"not JSON", 200, "hello", "not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := executeUnavailable(tt.status, tt.body, `{"a":1,"b":2}`)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("executeUnavailable = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParsers(t *testing.T) {
	t.Run("VmRSS", func(t *testing.T) {
		got, err := parseMem("Name:\tcaddy\nVmPeak:\t 900000 kB\nVmRSS:\t   71680 kB\nRssAnon:\t 51200 kB\nRssFile:\t 20480 kB\n")
		if want := (memStatus{RSS: 70, Anon: 50, File: 20}); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseMem = %+v, %v; want %+v", got, err, want)
		}
		if _, err := parseMem("Name:\tzombie\n"); err == nil {
			t.Error("parseMem without VmRSS succeeded")
		}
		if _, err := parseMem("VmRSS:\t12 MB\n"); err == nil {
			t.Error("parseMem accepted a unit other than kB")
		}
	})
	t.Run("store mappings", func(t *testing.T) {
		smaps := "" +
			"00400000-00c00000 r-xp 00000000 08:01 12 /opt/caddy\nRss:  8192 kB\n" +
			"7f00-7f10 r--s 00000000 08:01 13 /tmp/x/store/000001.sst\nSize: 2048 kB\nRss:  1024 kB\n" +
			"7f10-7f20 r--s 00000000 08:01 14 /tmp/x/store/000002.sst\nRss:  512 kB\n" +
			"7f20-7f30 rw-s 00000000 08:01 15 /tmp/x/store/000001.vlog\nRss:  2048 kB\n" +
			"7f30-7f40 rw-s 00000000 08:01 16 /tmp/x/storeother/000003.sst\nRss:  4096 kB\n" +
			"7f40-7f50 rw-p 00000000 00:00 0 \nRss:  4096 kB\n"
		got, err := residentUnder(smaps, "/tmp/x/store/")
		if want := map[string]float64{"sst": 1.5, "vlog": 2}; err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("residentUnder = %v, %v; want %v", got, err, want)
		}
	})
	t.Run("PSS", func(t *testing.T) {
		got, err := parseKBLine("55d0-7ffe ---p 00000000 00:00 0 [rollup]\nRss:  80000 kB\nPss:  20480 kB\n", "Pss:")
		if err != nil || got != 20 {
			t.Errorf("parseKBLine = %v, %v; want 20 MiB", got, err)
		}
		if _, err := parseKBLine("Rss: 1 kB\n", "Pss:"); err == nil {
			t.Error("parseKBLine found a missing key")
		}
	})
	t.Run("CPU model", func(t *testing.T) {
		in := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
		if got := parseCPUModel(strings.NewReader(in)); got != "AMD EPYC 7B13" {
			t.Errorf("parseCPUModel = %q", got)
		}
	})
	t.Run("subject tokens", func(t *testing.T) {
		tests := []struct {
			tok  string
			user int
			ok   bool
		}{
			{subjectToken(42, "run-1"), 42, true},
			{"bt.7.x-3", 7, true},
			{"bt.-1.x", 0, false},
			{"bt.7", 0, false},
			{"demo-token", 0, false},
		}
		for _, tt := range tests {
			if n, ok := userFromToken(tt.tok); n != tt.user || ok != tt.ok {
				t.Errorf("userFromToken(%q) = %d, %v; want %d, %v", tt.tok, n, ok, tt.user, tt.ok)
			}
		}
	})
	t.Run("process stat", func(t *testing.T) {
		// Field 2 may contain spaces and parentheses.
		stat := "4242 (caddy (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 30 20 20 0 12 0 98765 0 0"
		got, err := parseStat(stat)
		want := procStat{pid: 4242, ppid: 1, cpu: 3500 * time.Millisecond, start: 98765}
		if err != nil || got != want {
			t.Errorf("parseStat = %+v, %v; want %+v", got, err, want)
		}
		if _, err := parseStat("4242 (caddy) S 1"); err == nil {
			t.Error("parseStat of a short line succeeded")
		}
	})
	t.Run("own process tree", func(t *testing.T) {
		tree, err := processTree(os.Getpid())
		if err != nil || len(tree) == 0 || tree[0].pid != os.Getpid() || tree[0].ppid != os.Getppid() {
			t.Errorf("processTree = %+v, %v", tree, err)
		}
	})
	t.Run("only", func(t *testing.T) {
		if ids, err := parseOnly("1, 3,6"); err != nil || len(ids) != 3 || ids[1] != 3 {
			t.Errorf("parseOnly = %v, %v", ids, err)
		}
		if ids, err := parseOnly("8"); err != nil || len(ids) != 1 || ids[0] != 8 {
			t.Errorf("parseOnly(8) = %v, %v", ids, err)
		}
		if ids, err := parseOnly("10"); err != nil || len(ids) != 1 || ids[0] != authzScenarioID {
			t.Errorf("parseOnly(10) = %v, %v; want the authorization scenario", ids, err)
		}
		if ids, err := parseOnly("12"); err != nil || len(ids) != 1 || ids[0] != subscriptionsScenarioID {
			t.Errorf("parseOnly(12) = %v, %v; want the Subscriptions scenario", ids, err)
		}
		if _, err := parseOnly("13"); err == nil {
			t.Error("parseOnly accepted scenario 13")
		}
	})
}

func TestMarkdownTableAligns(t *testing.T) {
	got := markdownTable([][]string{{"#", "scenario", "value"}, {"1a", "a", "1/s"}, {"1b", "→ long name", "12345/s"}})
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("table has %d lines:\n%s", len(lines), got)
	}
	for _, l := range lines {
		if n := len([]rune(l)); n != len([]rune(lines[0])) {
			t.Errorf("line %q has width %d, header %d", l, n, len([]rune(lines[0])))
		}
	}
	if !strings.Contains(lines[1], "---: |") {
		t.Errorf("numeric column is not right-aligned: %q", lines[1])
	}
}

// TestLoadgenCountsFailures drives a real loopback server that fails every
// third request.
func TestLoadgenCountsFailures(t *testing.T) {
	var n int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++ // one connection, so one goroutine at a time
		if n%3 == 0 {
			http.Error(w, `{"error":"server_error"}`, http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	res, err := runLoad(context.Background(), loadSpec{
		Requests:    []requestSpec{{URL: srv.URL + "/x?n={seq}"}},
		Concurrency: 1, MaxRequests: 30, ServerPID: os.Getpid(),
		// The time cap must not hold a count-limited run (nor its CPU
		// reading) until it expires.
		Duration: duration(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 30 || res.Non2xx != 10 || res.TransportErrors != 0 || res.Status["500"] != 10 {
		t.Errorf("got %d requests, %d non-2xx, %d transport errors, status %v", res.Requests, res.Non2xx, res.TransportErrors, res.Status)
	}
	if len(res.ErrorSamples) == 0 || !strings.Contains(res.ErrorSamples[0], "HTTP 500") {
		t.Errorf("error samples %q", res.ErrorSamples)
	}
}

// TestSeedStoreIsReadableThroughIndexes seeds a real Badger store through
// the batching KV and reads it back the way the gateway does.
func TestSeedStoreIsReadableThroughIndexes(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if err := seedStore(ctx, dir, 300, 20); err != nil {
		t.Fatal(err)
	}
	st := storetest.Open(t, storetest.Badger(func(o *badgerkv.Options) { o.Dir = dir }))
	for _, i := range []int{0, 150, 299} {
		u, err := st.UserByEmail(ctx, userEmail(i))
		if err != nil {
			t.Fatalf("user %d: %v", i, err)
		}
		ms, err := st.MembershipsByProjectUser(ctx, benchProject, u.ID)
		if err != nil || len(ms) != 1 {
			t.Fatalf("memberships of user %d: %v, %v", i, ms, err)
		}
	}
	for _, i := range []int{0, 19} {
		b, err := st.BotByIdentifier(ctx, benchProject, botSystem, botValue(i))
		if err != nil || b.ID != botID(i) {
			t.Fatalf("bot %d: %v, %v", i, b, err)
		}
	}
}

func TestSoakLevelsIgnoreSpikes(t *testing.T) {
	series := func(v ...float64) []rssSample {
		out := make([]rssSample, len(v))
		for i, x := range v {
			out[i] = rssSample{Seconds: float64(i), memStatus: memStatus{RSS: x}}
		}
		return out
	}
	tests := []struct {
		name       string
		samples    []rssSample
		start, end float64
	}{
		{"one spike in each window is ignored", series(100, 250, 100, 105, 99, 101, 100, 98, 102, 100, 99, 101, 100, 240, 101), 100, 101},
		{"a steady leak shows", series(100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200, 210, 220, 230, 240), 110, 230},
		{"too few samples for fifths", series(100, 120), 100, 120},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, end := soakLevels(tt.samples)
			if start != tt.start || end != tt.end {
				t.Errorf("soakLevels = %v, %v; want %v, %v", start, end, tt.start, tt.end)
			}
		})
	}
}

func TestMergeResultsIsOneRun(t *testing.T) {
	half := func(from, to int, non2xx, throttled uint64, cpu float64) *loadResult {
		h := newHistogram()
		for _, d := range msRange(from, to) {
			h.record(d)
		}
		return &loadResult{
			Concurrency: 32, Requests: h.count(), Seconds: 2, Non2xx: non2xx, Throttled: throttled,
			Status: map[string]uint64{"200": h.count()}, MeanBodyBytes: 100, ServerCPUSeconds: cpu,
			ServerOwnCPUSeconds: cpu / 4, Latency: h.export(),
		}
	}
	tests := []struct {
		name       string
		parts      []*loadResult
		throughput float64
		p50, p99   float64
		errors     uint64
		cpuUs      float64
	}{
		{"one part is returned as is", []*loadResult{half(1, 100, 0, 0, 0)}, 0, 0, 0, 0, 0},
		{"two halves", []*loadResult{half(1, 50, 2, 1, 0.05), half(51, 100, 3, 3, 0.05)}, 25, 50, 99, 1, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mergeResults(tt.parts...)
			if err != nil {
				t.Fatal(err)
			}
			if len(tt.parts) == 1 {
				if got != tt.parts[0] {
					t.Error("a single part was copied")
				}
				return
			}
			if got.Requests != 100 || math.Abs(got.Throughput-tt.throughput) > 1e-9 || got.errors() != tt.errors ||
				got.Status["200"] != 100 || math.Abs(got.ServerCPUPerRequestUs-tt.cpuUs) > 1e-6 ||
				math.Abs(got.ServerOwnCPUPerRequestUs-tt.cpuUs/4) > 1e-6 {
				t.Errorf("merged %+v", got)
			}
			if math.Abs(got.P50Ms-tt.p50) > tt.p50/128 || math.Abs(got.P99Ms-tt.p99) > tt.p99/128 {
				t.Errorf("p50 %.3f p99 %.3f, want %.0f and %.0f", got.P50Ms, got.P99Ms, tt.p50, tt.p99)
			}
		})
	}
}

func TestComparisonOrder(t *testing.T) {
	for _, tc := range []struct {
		rounds int
		want   []int
	}{
		{0, []int{0, 1}},
		{1, []int{0, 1}},
		{2, []int{0, 1, 1, 0}},
		{4, []int{0, 1, 1, 0, 1, 0, 0, 1}},
	} {
		got := comparisonOrder(tc.rounds)
		if !slices.Equal(got, tc.want) {
			t.Errorf("comparisonOrder(%d) = %v, want %v", tc.rounds, got, tc.want)
		}
		// Both sides get the same share, and the same mean position (a
		// linear drift weighs on both alike) once there are two pairs.
		var count, pos [2]int
		for k, side := range got {
			count[side]++
			pos[side] += k
		}
		if count[0] != count[1] || (tc.rounds >= 2 && pos[0] != pos[1]) {
			t.Errorf("comparisonOrder(%d) = %v is unbalanced: counts %v, positions %v", tc.rounds, got, count, pos)
		}
	}
}

func TestCPUTextSplitsWorkersOff(t *testing.T) {
	tests := []struct {
		name      string
		tree, own float64
		want      string
	}{
		{"no CPU reading", 0, 0, ""},
		{"no workers", 80, 80, "80µs"},
		{"workers' share too small to show", 80, 79.5, "80µs"},
		{"bot workers", 289, 145, "289µs (gateway 145, workers 144)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := loadResult{ServerCPUPerRequestUs: tt.tree, ServerOwnCPUPerRequestUs: tt.own}
			if got := r.cpuText(); got != tt.want {
				t.Errorf("cpuText = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTableFitsInHundredColumns renders a report with the widest rows the
// scenarios produce (long names, large numbers, the gateway/workers split,
// unavailable rows, an error) and checks every line fits and every full
// name is printed under the table.
func TestTableFitsInHundredColumns(t *testing.T) {
	long := strings.Repeat("a very long measurement name that a new scenario might give ", 3)
	// The widest values a run gives on a 2-CPU machine: five-digit rates, p99 in hundreds of
	// ms, four-digit CPU per request split between the gateway and its workers.
	load := &loadResult{Throughput: 99999, P50Ms: 123.45, P99Ms: 999.99, ServerCPUPerRequestUs: 1234, ServerOwnCPUPerRequestUs: 234, Non2xx: 12345, Throttled: 5}
	ratioCheck := newCheck("execution ratio bot/respond", 0.28, ">=", 0.50, "")
	ratioCheck.Label = "ratio bot/respond"
	rep := &report{
		Machine:  machine{CPUs: 2, CPUModel: "AMD EPYC 7B13 64-Core Processor with a long model name", GoVersion: "go1.25.4", OS: "linux/amd64", Node: "v20.19.5", LoadAvgStart: "10.00 9.00 8.00", LoadAvgEnd: "1.00 2.00 3.00"},
		Mode:     "full",
		Settings: defaultSettings(false),
		Scenarios: []*scenario{
			{ID: 3, Short: "bot $execute", Title: "bot execution (POST /fhir/R4/Bot/$execute?identifier=, JSON echo)",
				Measurements: []*measurement{
					{Label: "$execute echo", Name: long + "LABELLED", Load: load},
					{Name: long + "UNLABELLED", Load: load},
					{Name: long + "unavailable", Unavailable: long},
					{Name: "RSS after 100000 mixed requests", Value: 1234.5, Unit: "MiB"},
				},
				Checks: []*check{ratioCheck, newCheck(long, 123.4, "<=", 10, "ms"), newCheck(long, 1234.5, "<=", 200, "MiB"),
					newCheck(long, 12345, ">=", 2000, "/s"), newCheck(long, 123.4, "<=", 10, "%"), unavailableCheck(long, ">=", 8, "x", long)},
			},
			{ID: 7, Title: long + "a scenario another helper adds without a short title", Error: long,
				Measurements: []*measurement{{Name: "x", Load: load}}},
		},
	}
	var b strings.Builder
	if err := rep.writeTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for i, l := range strings.Split(out, "\n") {
		if n := len([]rune(l)); n > tableWidth {
			t.Errorf("line %d is %d columns:\n%s", i+1, n, l)
		}
	}
	for _, want := range []string{"| 3a ", "| 3j ", "$execute echo", "0.28 ≥ 0.50", "1234 = 234+1000", "123.40 ms ≤ 10", "12345/s ≥ 2000/s", "n/a (≥ 8×)", "+5 answered 429",
		"LABELLED", "UNLABELLED", "unavailable:", "error:", "AMD EPYC"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "a very long measurement name") < 6 {
		t.Errorf("full names are not all printed under the table:\n%s", out)
	}
}

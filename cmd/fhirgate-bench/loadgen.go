package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// loadSpec is what one load run sends. The parent writes it as JSON and
// runs `fhirgate-bench loadgen -spec FILE` in a separate process, so the
// client's CPU and garbage collector are not the measured server's.
type loadSpec struct {
	// Requests are sent in turn by every worker (a mix when several).
	Requests []requestSpec `json:"requests"`
	// Concurrency is the number of workers, each a closed loop on its own
	// keep-alive connection (with Rate, the most requests in flight).
	Concurrency int `json:"concurrency"`
	// Rate > 0 makes the run open-loop: request n is due n/Rate seconds
	// after the start, sent by the next free worker, and its latency runs
	// from when it was due, so a server that falls behind is charged for
	// the wait (no coordinated omission).
	Rate float64 `json:"rate,omitempty"`
	// Warmup runs before measuring; its requests count only as errors.
	Warmup duration `json:"warmup,omitempty"`
	// Duration is how long to measure (a cap when MaxRequests is set).
	Duration duration `json:"duration,omitempty"`
	// MaxRequests > 0 stops after that many requests in total.
	MaxRequests uint64 `json:"max_requests,omitempty"`
	// Timeout bounds one request. Default 30s.
	Timeout duration `json:"timeout,omitempty"`
	// ServerPID, when set, is the server process whose CPU time over the
	// measured window is reported: CPU per request is steadier than
	// throughput on a machine other work shares.
	ServerPID int `json:"server_pid,omitempty"`
}

// requestSpec is one request; URL and Body may hold {seq} placeholders
// (see template).
type requestSpec struct {
	Method string            `json:"method,omitempty"`
	URL    string            `json:"url"`
	Header map[string]string `json:"header,omitempty"`
	Body   string            `json:"body,omitempty"`
}

// loadResult is the loadgen's output, one JSON object on stdout.
type loadResult struct {
	Concurrency int     `json:"concurrency"`
	Requests    uint64  `json:"requests"` // completed in the measured window
	Seconds     float64 `json:"seconds"`
	Throughput  float64 `json:"throughput_per_s"`
	P50Ms       float64 `json:"p50_ms"`
	P90Ms       float64 `json:"p90_ms"`
	P99Ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	MeanMs      float64 `json:"mean_ms"`
	// Non2xx and TransportErrors count the whole run, warmup included: a
	// failed request is a failure whenever it happens. Throttled are the
	// 429s among Non2xx: admission control shedding the deliberate overload
	// of a closed loop (the bot runner's queue), reported but not failures.
	Non2xx          uint64            `json:"non_2xx"`
	Throttled       uint64            `json:"throttled_429"`
	TransportErrors uint64            `json:"transport_errors"`
	Status          map[string]uint64 `json:"status"`
	MeanBodyBytes   float64           `json:"mean_body_bytes"`
	// ServerCPUSeconds is the user+system CPU time of the server's process
	// tree (Caddy and its bot workers) over the measured window;
	// ServerCPUPerRequestUs the same per request. The Own fields are the
	// server process alone, so the rest is its children's (bot workers').
	ServerCPUSeconds         float64  `json:"server_cpu_seconds,omitempty"`
	ServerCPUPerRequestUs    float64  `json:"server_cpu_per_request_us,omitempty"`
	ServerOwnCPUSeconds      float64  `json:"server_own_cpu_seconds,omitempty"`
	ServerOwnCPUPerRequestUs float64  `json:"server_own_cpu_per_request_us,omitempty"`
	ErrorSamples             []string `json:"error_samples,omitempty"`
	// Latency is the measured window's histogram, so runs can be merged.
	Latency histogramJSON `json:"latency"`
}

// errors returns the failed requests: transport errors and non-2xx
// answers other than 429.
func (r loadResult) errors() uint64 { return r.Non2xx - r.Throttled + r.TransportErrors }

// duration is a time.Duration that reads and writes as "1.5s" in JSON.
type duration time.Duration

func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("parsing duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("parsing duration %q: %w", s, err)
	}
	*d = duration(v)
	return nil
}

// headerFlags collects repeated -H 'Name: value' flags.
type headerFlags map[string]string

func (h headerFlags) String() string { return fmt.Sprint(map[string]string(h)) }

func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok {
		return fmt.Errorf("header %q: want 'Name: value'", v)
	}
	h[strings.TrimSpace(name)] = strings.TrimSpace(value)
	return nil
}

// loadgenMain is `fhirgate-bench loadgen`: either -spec FILE, or one
// request described by flags.
func loadgenMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	specFile := fs.String("spec", "", "JSON load spec (overrides the other flags)")
	url := fs.String("url", "", "request URL ({seq} and {seqmod:N} are replaced per request)")
	method := fs.String("method", http.MethodGet, "request method")
	body := fs.String("body", "", "request body ({seq} and {seqmod:N} are replaced per request)")
	conc := fs.Int("c", 32, "concurrency (connections)")
	dur := fs.Duration("d", 10*time.Second, "measured duration")
	warm := fs.Duration("warmup", time.Second, "warmup before measuring")
	n := fs.Uint64("n", 0, "stop after this many requests (0: run for -d)")
	headers := headerFlags{}
	fs.Var(headers, "H", "request header 'Name: value' (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var spec loadSpec
	if *specFile != "" {
		data, err := os.ReadFile(*specFile)
		if err != nil {
			return fmt.Errorf("reading spec: %w", err)
		}
		if err := json.Unmarshal(data, &spec); err != nil {
			return fmt.Errorf("parsing spec %s: %w", *specFile, err)
		}
	} else {
		if *url == "" {
			return errors.New("loadgen needs -spec or -url")
		}
		spec = loadSpec{
			Requests:    []requestSpec{{Method: *method, URL: *url, Header: headers, Body: *body}},
			Concurrency: *conc, Duration: duration(*dur), Warmup: duration(*warm), MaxRequests: *n,
		}
	}
	res, err := runLoad(ctx, spec)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// compiledRequest is a requestSpec with its templates parsed.
type compiledRequest struct {
	method string
	url    template
	body   template
	header http.Header
}

func compile(spec loadSpec) ([]compiledRequest, error) {
	if len(spec.Requests) == 0 {
		return nil, errors.New("load spec has no requests")
	}
	out := make([]compiledRequest, len(spec.Requests))
	for i, r := range spec.Requests {
		u, err := parseTemplate(r.URL)
		if err != nil {
			return nil, fmt.Errorf("request %d url: %w", i, err)
		}
		b, err := parseTemplate(r.Body)
		if err != nil {
			return nil, fmt.Errorf("request %d body: %w", i, err)
		}
		h := make(http.Header, len(r.Header))
		for k, v := range r.Header {
			h.Set(k, v)
		}
		m := r.Method
		if m == "" {
			m = http.MethodGet
		}
		out[i] = compiledRequest{method: m, url: u, body: b, header: h}
	}
	return out, nil
}

// loadRun is the shared state of one run.
type loadRun struct {
	reqs       []compiledRequest
	seq        atomic.Uint64 // next request sequence number
	start      time.Time
	rate       float64 // requests per second; 0: closed loop
	maxReqs    uint64
	measureAt  time.Time
	endAt      time.Time // zero: no time limit
	timeout    time.Duration
	non2xx     atomic.Uint64
	throttled  atomic.Uint64
	transport  atomic.Uint64
	samplesMu  sync.Mutex
	samples    []string
	statusMu   sync.Mutex
	statusSeen map[int]uint64
}

// maxErrorSamples bounds the error messages kept for the report.
const maxErrorSamples = 5

// runLoad drives the load and summarises it.
func runLoad(ctx context.Context, spec loadSpec) (loadResult, error) {
	reqs, err := compile(spec)
	if err != nil {
		return loadResult{}, err
	}
	if spec.Concurrency <= 0 {
		return loadResult{}, errors.New("concurrency must be positive")
	}
	if spec.Duration <= 0 && spec.MaxRequests == 0 {
		return loadResult{}, errors.New("a load run needs a duration or a request count")
	}
	timeout := time.Duration(spec.Timeout)
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	start := time.Now()
	if spec.Rate < 0 {
		return loadResult{}, errors.New("rate must not be negative")
	}
	run := &loadRun{
		reqs: reqs, maxReqs: spec.MaxRequests, timeout: timeout, start: start, rate: spec.Rate,
		measureAt:  start.Add(time.Duration(spec.Warmup)),
		statusSeen: map[int]uint64{},
	}
	if spec.Duration > 0 {
		run.endAt = run.measureAt.Add(time.Duration(spec.Duration))
	}

	type workerOut struct {
		h     *histogram
		bytes uint64
		last  time.Time
	}
	cpu := newCPUWindow(spec.ServerPID, run.measureAt, run.endAt)
	outs := make([]workerOut, spec.Concurrency)
	var wg sync.WaitGroup
	for w := range spec.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, bytes, last := run.worker(ctx, w)
			outs[w] = workerOut{h, bytes, last}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return loadResult{}, fmt.Errorf("load run interrupted: %w", err)
	}
	cpuSecs, ownSecs, cpuErr := cpu.finish()

	total := newHistogram()
	var bytes uint64
	end := run.endAt
	if spec.MaxRequests > 0 {
		// A count-limited run ends when its last request does.
		end = run.measureAt
		for _, o := range outs {
			if o.last.After(end) {
				end = o.last
			}
		}
	}
	for _, o := range outs {
		total.merge(o.h)
		bytes += o.bytes
	}
	secs := end.Sub(run.measureAt).Seconds()
	res := loadResult{
		Concurrency:     spec.Concurrency,
		Requests:        total.count(),
		Seconds:         secs,
		P50Ms:           ms(total.quantile(0.50)),
		P90Ms:           ms(total.quantile(0.90)),
		P99Ms:           ms(total.quantile(0.99)),
		MaxMs:           ms(total.max),
		MeanMs:          ms(total.mean()),
		Non2xx:          run.non2xx.Load(),
		Throttled:       run.throttled.Load(),
		TransportErrors: run.transport.Load(),
		Status:          map[string]uint64{},
		ErrorSamples:    run.samples,
		Latency:         total.export(),
	}
	if secs > 0 {
		res.Throughput = float64(res.Requests) / secs
	}
	if res.Requests > 0 {
		res.MeanBodyBytes = float64(bytes) / float64(res.Requests)
	}
	if spec.ServerPID != 0 {
		if cpuErr != nil {
			return loadResult{}, cpuErr
		}
		res.ServerCPUSeconds, res.ServerOwnCPUSeconds = cpuSecs, ownSecs
		res.perRequestCPU()
	}
	for code, n := range run.statusSeen {
		res.Status[strconv.Itoa(code)] = n
	}
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// sendFunc sends the k-th request of a worker, with sequence number seq,
// and returns the answer's size and status (an HTTP status, or one an MLLP
// acknowledgment maps to), the start of a failed answer for the report,
// and a transport error.
type sendFunc func(ctx context.Context, k int, seq uint64) (n, status int, sample string, err error)

// worker is one closed-loop client on its own connection: HTTP, or MLLP for
// a spec whose requests use the MLLP method. It returns the latencies, body
// bytes and completion time of its measured requests.
func (run *loadRun) worker(ctx context.Context, w int) (*histogram, uint64, time.Time) {
	if run.reqs[0].method == methodMLLP {
		send, closeConn := run.mllpSender()
		defer closeConn()
		return run.loop(ctx, w, send)
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 1,
		MaxConnsPerHost:     1,
		DisableCompression:  true,
		IdleConnTimeout:     90 * time.Second,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: run.timeout}
	buf := make([]byte, 32<<10)
	return run.loop(ctx, w, func(ctx context.Context, k int, seq uint64) (int, int, string, error) {
		req, err := run.reqs[k%len(run.reqs)].build(ctx, seq)
		if err != nil {
			return 0, 0, "", err
		}
		return do(client, req, buf)
	})
}

// loop sends requests until the run ends, counting failures and recording
// the latencies of the measured window.
func (run *loadRun) loop(ctx context.Context, w int, send sendFunc) (*histogram, uint64, time.Time) {
	h := newHistogram()
	var bytes uint64
	var last time.Time
	for k := w; ctx.Err() == nil; k++ {
		if !run.endAt.IsZero() && !time.Now().Before(run.endAt) {
			break
		}
		seq := run.seq.Add(1) - 1
		if run.maxReqs > 0 && seq >= run.maxReqs {
			break
		}
		began := time.Now()
		if run.rate > 0 {
			if began = run.due(seq); !run.endAt.IsZero() && !began.Before(run.endAt) {
				break
			}
			if !sleepUntil(ctx, began) {
				break
			}
		}
		n, status, sample, err := send(ctx, k, seq)
		done := time.Now()
		switch {
		case err != nil:
			if ctx.Err() != nil {
				break
			}
			run.fail(&run.transport, err.Error())
		case status < 200 || status > 299:
			if status == http.StatusTooManyRequests {
				run.throttled.Add(1)
			}
			run.fail(&run.non2xx, fmt.Sprintf("HTTP %d: %s", status, sample))
		}
		if status != 0 {
			run.countStatus(status)
		}
		if err == nil && !began.Before(run.measureAt) && (run.endAt.IsZero() || done.Before(run.endAt)) {
			h.record(done.Sub(began))
			bytes += uint64(n)
			last = done
		}
	}
	return h, bytes, last
}

// due is when request seq is sent in an open-loop run.
func (run *loadRun) due(seq uint64) time.Time {
	return run.start.Add(time.Duration(float64(seq) / run.rate * float64(time.Second)))
}

// sleepUntil waits for t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// build makes the request for sequence number seq.
func (c compiledRequest) build(ctx context.Context, seq uint64) (*http.Request, error) {
	var body io.Reader
	b := c.body.render(seq)
	if b != "" {
		body = strings.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, c.url.render(seq), body)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	return req, nil
}

// do sends req and reads the whole body (so the connection is reused). For
// a non-2xx answer it returns the start of the body for the report; the
// endpoints measured answer errors as OAuth JSON or OperationOutcome, which
// carry no credentials.
func do(client *http.Client, req *http.Request, buf []byte) (n int, status int, sample string, err error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, "", err
	}
	defer resp.Body.Close()
	for {
		m, rerr := resp.Body.Read(buf)
		if n == 0 && (resp.StatusCode < 200 || resp.StatusCode > 299) {
			sample = strings.TrimSpace(string(buf[:min(m, 200)]))
		}
		n += m
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return n, resp.StatusCode, sample, fmt.Errorf("reading body: %w", rerr)
		}
	}
	return n, resp.StatusCode, sample, nil
}

func (run *loadRun) fail(counter *atomic.Uint64, msg string) {
	counter.Add(1)
	run.samplesMu.Lock()
	defer run.samplesMu.Unlock()
	if len(run.samples) < maxErrorSamples {
		run.samples = append(run.samples, msg)
	}
}

func (run *loadRun) countStatus(code int) {
	run.statusMu.Lock()
	run.statusSeen[code]++
	run.statusMu.Unlock()
}

// perRequestCPU derives the per-request CPU figures from the window's totals.
func (r *loadResult) perRequestCPU() {
	if r.Requests > 0 {
		r.ServerCPUPerRequestUs = r.ServerCPUSeconds / float64(r.Requests) * 1e6
		r.ServerOwnCPUPerRequestUs = r.ServerOwnCPUSeconds / float64(r.Requests) * 1e6
	}
}

// cpuText is the CPU per request for people: the process tree's, and when bot
// workers took a share of it, the gateway's own part.
func (r *loadResult) cpuText() string {
	if r.ServerCPUPerRequestUs <= 0 {
		return ""
	}
	s := fmt.Sprintf("%.0fµs", r.ServerCPUPerRequestUs)
	if workers := r.ServerCPUPerRequestUs - r.ServerOwnCPUPerRequestUs; workers >= 1 && workers >= r.ServerCPUPerRequestUs/20 {
		s += fmt.Sprintf(" (gateway %.0f, workers %.0f)", r.ServerOwnCPUPerRequestUs, workers)
	}
	return s
}

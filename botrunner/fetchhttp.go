package botrunner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/fhirgate/fhirgate/internal/egress"
)

// Defaults of HTTPFetcher's bounds.
const (
	DefaultMaxFetchCalls      = 1000
	DefaultMaxFetchConcurrent = 16
	// MaxFetchRecords bounds the calls a run's records keep (the first ones); FetchCalls counts
	// them all.
	MaxFetchRecords = 100
)

// HTTPFetcher is a Fetcher over an HTTP client: in fhirgate the project's egress client, which
// holds every request and redirect to the project's allow-list. Make one per run: it bounds the
// run's calls, and records each (host, status, bytes; never headers or bodies) for its audit.
type HTTPFetcher struct {
	// Client returns the client. It is called on the first fetch, so a run that never fetches
	// pays nothing for it.
	Client func() (*http.Client, error)
	// MaxResponseBytes bounds a response body. Default: MaxFetchBodyBytes.
	MaxResponseBytes int64
	// MaxCalls bounds the fetches of the run. Default: DefaultMaxFetchCalls.
	MaxCalls int
	// MaxConcurrent bounds the fetches in flight at once; more wait. Default:
	// DefaultMaxFetchConcurrent.
	MaxConcurrent int

	once      sync.Once
	client    *http.Client
	clientErr error
	sem       chan struct{}

	mu      sync.Mutex
	calls   int
	records []FetchRecord
}

// FetchRecord is one fetch of a run, as its audit event shows it.
type FetchRecord struct {
	Host          string // host:port
	Status        int    // 0 when there was no HTTP answer
	Outcome       string // "ok" (an HTTP answer, whatever its status), "refused" (egress), "failed"
	BytesSent     int64  // request body
	BytesReceived int64  // response body
}

// Records returns the calls recorded (at most MaxFetchRecords) and how many calls there were.
func (f *HTTPFetcher) Records() ([]FetchRecord, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FetchRecord(nil), f.records...), f.calls
}

// Fetch makes the request with the client.
func (f *HTTPFetcher) Fetch(ctx context.Context, r *FetchRequest) (*FetchResponse, error) {
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("only absolute http and https URLs can be fetched")
	}
	rec := FetchRecord{Host: hostPort(u), Outcome: "failed", BytesSent: int64(len(r.Body))}
	if err := f.count(); err != nil {
		return nil, err
	}
	defer func() { f.record(rec) }()
	f.once.Do(func() {
		f.client, f.clientErr = f.Client()
		f.sem = make(chan struct{}, cmpOr(f.MaxConcurrent, DefaultMaxFetchConcurrent))
	})
	if f.clientErr != nil {
		return nil, f.clientErr
	}
	select {
	case f.sem <- struct{}{}:
		defer func() { <-f.sem }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	client := *f.client
	switch r.Redirect {
	case "manual":
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	case "error":
		client.CheckRedirect = func(*http.Request, []*http.Request) error {
			return errors.New("redirect mode is set to error")
		}
	}
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, body)
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "fhirgate-bot")
	}
	resp, err := client.Do(req)
	if err != nil {
		var re *egress.RefusedError
		if errors.As(err, &re) {
			rec.Outcome = "refused"
		}
		return nil, err
	}
	defer resp.Body.Close()
	rec.Status = resp.StatusCode
	max := f.MaxResponseBytes
	if max <= 0 {
		max = MaxFetchBodyBytes
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	rec.BytesReceived = int64(len(b))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the response: %w", err)
	case int64(len(b)) > max:
		return nil, fmt.Errorf("the response body exceeds %d bytes", max)
	}
	rec.Outcome = "ok"
	return &FetchResponse{
		Status:     resp.StatusCode,
		StatusText: strings.TrimSpace(strings.TrimPrefix(resp.Status, fmt.Sprint(resp.StatusCode))),
		URL:        resp.Request.URL.String(),
		Redirected: resp.Request.URL.String() != req.URL.String(),
		Header:     resp.Header,
		Body:       b,
	}, nil
}

func (f *HTTPFetcher) count() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls >= cmpOr(f.MaxCalls, DefaultMaxFetchCalls) {
		return fmt.Errorf("a run may make at most %d fetch calls", cmpOr(f.MaxCalls, DefaultMaxFetchCalls))
	}
	f.calls++
	return nil
}

func (f *HTTPFetcher) record(r FetchRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.records) < MaxFetchRecords {
		f.records = append(f.records, r)
	}
}

// hostPort is u's host with its port, the default one when u has none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

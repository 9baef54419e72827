package botrunner

import (
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/egress"
)

// fetchServer is a loopback server for the sandbox's fetch: /json, /echo, /bytes, /slow,
// /redirect?to= and /barrier?n= (answers only once n requests are in flight at once).
type fetchServer struct {
	url string // http://127.0.0.1:port

	mu       sync.Mutex
	inFlight int
	arrived  chan struct{}
}

func newFetchServer(t *testing.T) *fetchServer {
	fs := &fetchServer{arrived: make(chan struct{}, 100)}
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		_, _ = io.WriteString(w, `{"hello":"world","n":1}`)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		out := map[string]any{"method": r.Method, "contentType": r.Header.Get("Content-Type"), "custom": r.Header.Get("X-Custom"),
			"agent": r.Header.Get("User-Agent"), "body": string(body), "query": r.URL.RawQuery}
		if mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
			mr := multipart.NewReader(strings.NewReader(string(body)), params["boundary"])
			parts := map[string]string{}
			for {
				p, err := mr.NextPart()
				if err != nil {
					break
				}
				b, _ := io.ReadAll(p)
				parts[p.FormName()+"|"+p.FileName()+"|"+p.Header.Get("Content-Type")] = string(b)
			}
			out["parts"] = parts
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte{0, 1, 2, 255}) })
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		chunk := strings.Repeat("x", 64<<10)
		for range 32 { // 2 MiB
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/barrier", func(w http.ResponseWriter, r *http.Request) {
		n := len(r.URL.Query().Get("n"))
		fs.mu.Lock()
		fs.inFlight++
		if fs.inFlight >= n {
			for range n {
				fs.arrived <- struct{}{}
			}
		}
		fs.mu.Unlock()
		// Only when n requests are here at once does every one of them get its answer: fetches
		// made one after another would wait here until the bot's deadline.
		select {
		case <-fs.arrived:
			_, _ = io.WriteString(w, "together")
		case <-r.Context().Done():
		case <-release:
		}
	})
	s := httptest.NewServer(mux)
	t.Cleanup(func() { close(release); s.Close() })
	fs.url = s.URL
	return fs
}

// fetchExecutors are the in-process runner and a pool of worker processes.
func fetchExecutors(t *testing.T) map[string]Executor {
	return map[string]Executor{"inprocess": New(Options{}), "process": newTestPool(t, PoolOptions{})}
}

// allowing returns a run's Fetcher over an egress client that allows only the listed hosts.
func allowing(hosts ...string) *HTTPFetcher {
	e := egress.New(egress.Options{Lookup: func(string) (*egress.Policy, error) { return nil, nil }})
	return &HTTPFetcher{
		Client:           func() (*http.Client, error) { return e.Client(&egress.Policy{AllowHTTP: hosts}) },
		MaxResponseBytes: 1 << 20,
	}
}

func TestSandboxFetch(t *testing.T) {
	fs := newFetchServer(t)
	host := strings.TrimPrefix(fs.url, "http://")
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "secret") }))
	defer other.Close()
	cases := []struct {
		name    string
		src     string
		want    string // substring of the body
		timeout time.Duration
		outcome Outcome
		noFetch bool
	}{
		{name: "json, status and headers", src: `export async function handler() {
  const r = await fetch(URL_ + '/json');
  return { status: r.status, ok: r.ok, ct: r.headers.get('Content-Type'), multi: r.headers.get('x-multi'), body: await r.json(), used: r.bodyUsed };
}`, want: `{"status":200,"ok":true,"ct":"application/json","multi":"a, b","body":{"hello":"world","n":1},"used":true}`},
		{name: "post with headers and a JSON body", src: `export async function handler() {
  const r = await fetch(new Request(URL_ + '/echo?a=1', { method: 'post', headers: new Headers({ 'X-Custom': 'yes', 'Content-Type': 'application/json' }), body: JSON.stringify({ a: 1 }) }));
  return await r.json();
}`, want: `"body":"{\"a\":1}","contentType":"application/json","custom":"yes","method":"POST","query":"a=1"`},
		{name: "URLSearchParams body", src: `export async function handler() {
  const r = await fetch(URL_ + '/echo', { method: 'POST', body: new URLSearchParams({ q: 'a b', n: '1' }) });
  return await r.json();
}`, want: `"body":"q=a+b&n=1","contentType":"application/x-www-form-urlencoded;charset=UTF-8"`},
		{name: "FormData body", src: `export async function handler() {
  const f = new FormData();
  f.append('name', 'value');
  f.append('file', new TextEncoder().encode('abc'), 'a.txt');
  const r = await fetch(URL_ + '/echo', { method: 'POST', body: f });
  return (await r.json()).parts;
}`, want: `{"file|a.txt|application/octet-stream":"abc","name||":"value"}`},
		{name: "node-fetch and form-data", src: `import nodeFetch, { Response as R } from 'node-fetch';
import FormData from 'form-data';
export async function handler() {
  const form = new FormData();
  form.append('doc', 'text', { filename: 'd.txt', contentType: 'text/plain' });
  const r = await nodeFetch(URL_ + '/echo', { method: 'POST', body: form, headers: form.getHeaders() });
  const cjs = require('node-fetch');
  return { parts: (await r.json()).parts, same: cjs === nodeFetch || cjs.default === nodeFetch, isResponse: r instanceof R };
}`, want: `{"parts":{"doc|d.txt|text/plain":"text"},"same":true,"isResponse":true}`},
		{name: "arrayBuffer", src: `export async function handler() {
  const r = await fetch(URL_ + '/bytes');
  return Array.from(new Uint8Array(await r.arrayBuffer()));
}`, want: `[0,1,2,255]`},
		{name: "Promise.all runs the fetches concurrently", src: `export async function handler() {
  const rs = await Promise.all([1, 2, 3, 4].map(() => fetch(URL_ + '/barrier?n=xxxx')));
  return await Promise.all(rs.map((r) => r.text()));
}`, want: `["together","together","together","together"]`},
		{name: "fetch after a timer", src: `export async function handler() {
  await new Promise((r) => setTimeout(r, 5));
  return (await fetch(URL_ + '/json')).json();
}`, want: `{"hello":"world","n":1}`},
		{name: "a timer fires while a fetch is pending", src: `export async function handler() {
  const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error('gave up waiting')), 50));
  try { await Promise.race([fetch(URL_ + '/slow'), timeout]); return 'answered'; } catch (e) { return e.message; }
}`, want: `gave up waiting`},
		{name: "host not on the allow-list", src: `export async function handler() {
  try { await fetch(OTHER + '/'); return 'reached'; } catch (e) { return { type: e instanceof TypeError, message: e.message, cause: e.cause.message }; }
}`, want: `"message":"fetch failed: egress to 127.0.0.1:`},
		{name: "redirect to a host not on the allow-list", src: `export async function handler() {
  try { await fetch(URL_ + '/redirect?to=' + encodeURIComponent(OTHER + '/')); return 'reached'; } catch (e) { return e.message; }
}`, want: `not on the project's egress allow-list`},
		{name: "listed name resolving to 127.0.0.1", src: `export async function handler() {
  try { await fetch(URL_.replace('127.0.0.1', 'localhost') + '/json'); return 'reached'; } catch (e) { return e.message; }
}`, want: `a loopback address`},
		{name: "huge response", src: `export async function handler() {
  try { await fetch(URL_ + '/huge'); return 'reached'; } catch (e) { return e.message; }
}`, want: `exceeds 1048576 bytes`},
		{name: "manual redirect", src: `export async function handler() {
  const r = await fetch(URL_ + '/redirect?to=/json', { redirect: 'manual' });
  return { status: r.status, location: r.headers.get('location') };
}`, want: `{"status":302,"location":"/json"}`},
		{name: "followed redirect", src: `export async function handler() {
  const r = await fetch(URL_ + '/redirect?to=/json');
  return { redirected: r.redirected, url: r.url.replace(URL_, '') };
}`, want: `{"redirected":true,"url":"/json"}`},
		{name: "Response and Headers standalone", src: `export async function handler() {
  const r = Response.json({ a: 1 }, { status: 201 });
  const h = new Headers([['a', '1'], ['B', '2']]);
  h.append('a', '3');
  return { s: r.status, t: await r.text(), h: [...h], ct: r.headers.get('content-type') };
}`, want: `{"s":201,"t":"{\"a\":1}","h":[["a","1, 3"],["b","2"]],"ct":"application/json"}`},
		{name: "a slow answer stops at the run's deadline", src: `export async function handler() {
  await fetch(URL_ + '/slow');
  return 'done';
}`, timeout: 300 * time.Millisecond, outcome: OutcomeTimeout, want: "timed out"},
		{name: "request headers over the bound", src: `export async function handler() {
  try { await fetch(URL_ + '/json', { headers: { 'X-Big': 'x'.repeat(70000) } }); return 'reached'; } catch (e) { return e.message; }
}`, want: `the URL and request headers are larger than fetch may send (65536 bytes)`},
		{name: "request body over the bound", src: `export async function handler() {
  try { await fetch(URL_ + '/echo', { method: 'POST', body: 'x'.repeat(10 * 1024 * 1024 + 1) }); return 'reached'; } catch (e) { return e.message; }
}`, want: `the request body of 10485761 bytes is larger than fetch may send (10485760 bytes)`},
		{name: "no egress", noFetch: true, src: `export async function handler() {
  try { await fetch(URL_ + '/json'); return 'reached'; } catch (e) { return e.message; }
}`, want: `fetch failed: fetch is not available: the gateway gives this bot no egress`},
	}
	for name, ex := range fetchExecutors(t) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					src := strings.ReplaceAll(tc.src, "URL_", "'"+fs.url+"'")
					src = strings.ReplaceAll(src, "OTHER", "'"+other.URL+"'")
					prog := mustCompile(t, "index.ts", src)
					req := Request{Code: prog.JS, Timeout: cmpDuration(tc.timeout, 10*time.Second)}
					var f *HTTPFetcher
					if !tc.noFetch {
						f = allowing(host, strings.Replace(host, "127.0.0.1", "localhost", 1))
						req.Fetch = f
					}
					res, err := ex.Run(ctxT(t), req)
					if err != nil {
						t.Fatal(err)
					}
					if res.Outcome != tc.outcome || !strings.Contains(string(res.Body), tc.want) {
						t.Fatalf("got %v %s (%s), want %v with %s", res.Outcome, res.Body, res.Message, tc.outcome, tc.want)
					}
				})
			}
		})
	}
}

func TestSandboxFetchIsRecorded(t *testing.T) {
	fs := newFetchServer(t)
	u, _ := url.Parse(fs.url)
	prog := mustCompile(t, "index.ts", `export async function handler() {
  await fetch('`+fs.url+`/echo', { method: 'POST', body: 'four' });
  try { await fetch('http://127.0.0.1:1/'); } catch (e) {}
  return 'ok';
}`)
	for name, ex := range fetchExecutors(t) {
		t.Run(name, func(t *testing.T) {
			f := allowing(u.Host)
			res, err := ex.Run(ctxT(t), Request{Code: prog.JS, Fetch: f})
			if err != nil || res.Outcome != OutcomeSuccess {
				t.Fatalf("%+v %v", res, err)
			}
			recs, n := f.Records()
			if n != 2 || len(recs) != 2 {
				t.Fatalf("records %+v, %d calls", recs, n)
			}
			if r := recs[0]; r.Host != u.Host || r.Status != 200 || r.Outcome != "ok" || r.BytesSent != 4 || r.BytesReceived == 0 {
				t.Errorf("first record %+v", r)
			}
			if r := recs[1]; r.Host != "127.0.0.1:1" || r.Status != 0 || r.Outcome != "refused" {
				t.Errorf("second record %+v", r)
			}
		})
	}
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

package botrunner

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/dop251/goja"
)

// Fetcher is the gateway's side of the sandbox's fetch: one HTTP request to the internet, which
// the implementation holds to the project's egress allow-list (HTTPFetcher over the project's
// egress client). ctx ends at the run's deadline. An error means no HTTP answer: refused, not
// reachable, too large, timed out; its message reaches the bot.
type Fetcher interface {
	Fetch(ctx context.Context, req *FetchRequest) (*FetchResponse, error)
}

// FetchRequest is one fetch call.
type FetchRequest struct {
	Method string
	URL    string // absolute http or https URL
	Header http.Header
	Body   []byte // nil: no body
	// Redirect is fetch's redirect mode: "follow" (the default), "manual" (answer the
	// redirect itself) or "error" (a redirect fails the request).
	Redirect string
}

// FetchResponse is the answer to a fetch call.
type FetchResponse struct {
	Status     int
	StatusText string
	URL        string // after redirects
	Redirected bool
	Header     http.Header
	Body       []byte
}

// MaxFetchBodyBytes bounds a request body a bot passes to fetch, checked in the sandbox before
// it reaches the Fetcher (which may bound it lower).
const MaxFetchBodyBytes = 10 << 20

// maxFetchHeadBytes bounds a fetch's URL and request headers together, as servers bound what
// they accept (and so that a fetch frame always fits the pipe's frame bound).
const maxFetchHeadBytes = 64 << 10

//go:embed fetch.js
var fetchSource string

var fetchProgram = embeddedProgram("fetch", fetchSource)

// fetchGlobals are the globals fetch.js defines.
var fetchGlobals = []string{"fetch", "Request", "Response", "Headers", "FormData"}

// The fetch globals join the lazily built sandbox globals (globals.go).
func init() {
	for _, name := range fetchGlobals {
		sandboxGlobals[name] = func(x *execution) goja.Value { return x.fetchModule().Get(name) }
	}
}

// fetchModule evaluates fetch.js once per runtime.
func (x *execution) fetchModule() *goja.Object {
	if x.fetchAPI == nil {
		native := x.rt.NewObject()
		_ = native.Set("fetch", x.fn("fetch", x.fetchNative))
		_ = native.Set("encode", x.fn("encode", func(c goja.FunctionCall) goja.Value {
			return x.newUint8Array([]byte(c.Argument(0).String()))
		}))
		_ = native.Set("decode", x.fn("decode", func(c goja.FunctionCall) goja.Value {
			b, _ := x.bufferBytes(c.Argument(0))
			return x.rt.ToValue(strings.ToValidUTF8(string(trimBOM(b)), "\uFFFD"))
		}))
		_ = native.Set("URLSearchParams", x.urlModule().Get("URLSearchParams"))
		x.fetchAPI = x.evalFactory(fetchProgram(), native)
	}
	return x.fetchAPI
}

// fetchRequire answers require('node-fetch') (the fetch function, with Headers, Request,
// Response and FetchError on it, as node-fetch exports them) and require('form-data') (the
// FormData class, which has form-data's getHeaders, getBoundary and getBuffer too).
func (x *execution) fetchRequire(name string) goja.Value {
	if name == "form-data" {
		return x.fetchModule().Get("FormData")
	}
	return x.fetchModule().Get("nodeFetch")
}

// fetchNative is native.fetch(method, url, headers, body, redirect): it starts the request on
// the run's loop and returns a promise of {status, statusText, url, redirected, headers, body}.
// headers is an array of [name, value] pairs, body an ArrayBuffer view or undefined.
func (x *execution) fetchNative(c goja.FunctionCall) goja.Value {
	rt := x.rt
	p, resolve, reject := rt.NewPromise()
	fail := func(msg string) goja.Value {
		if err := reject(x.fetchError(msg)); err != nil {
			panic(err)
		}
		return rt.ToValue(p)
	}
	req := &FetchRequest{Method: c.Argument(0).String(), URL: c.Argument(1).String(), Header: http.Header{}, Redirect: c.Argument(4).String()}
	u, err := url.Parse(req.URL)
	if err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail("only absolute http and https URLs can be fetched, not '" + truncate(req.URL, 200) + "'")
	}
	head := len(req.URL)
	if pairs, ok := c.Argument(2).(*goja.Object); ok {
		for _, k := range pairs.Keys() {
			pair, ok := pairs.Get(k).(*goja.Object)
			if !ok {
				continue
			}
			name, value := pair.Get("0").String(), pair.Get("1").String()
			if head += len(name) + len(value) + 4; head > maxFetchHeadBytes {
				return fail(fmt.Sprintf("the URL and request headers are larger than fetch may send (%d bytes)", maxFetchHeadBytes))
			}
			req.Header.Add(name, value)
		}
	}
	if b := c.Argument(3); !goja.IsUndefined(b) && !goja.IsNull(b) {
		body, ok := x.bufferBytes(b)
		if !ok {
			return fail("the request body must be bytes")
		}
		if len(body) > MaxFetchBodyBytes {
			return fail(fmt.Sprintf("the request body of %d bytes is larger than fetch may send (%d bytes)", len(body), MaxFetchBodyBytes))
		}
		req.Body = append([]byte{}, body...) // the bot may change its buffer while the request runs
	}
	f := x.req.Fetch
	if f == nil {
		return fail(noEgress)
	}
	x.eventLoop().spawn(func(ctx context.Context) func() error {
		resp, err := f.Fetch(ctx, req)
		return func() error {
			if err != nil {
				return reject(x.fetchError(fetchErrorMessage(ctx, err)))
			}
			return resolve(x.fetchResult(resp))
		}
	})
	return rt.ToValue(p)
}

// fetchErrorMessage is what the bot is told of a failed fetch; a *url.Error's URL (whose query
// may hold a key) is left out.
func fetchErrorMessage(ctx context.Context, err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if ctx.Err() != nil {
		return "the run's deadline passed"
	}
	return err.Error()
}

// fetchError is fetch's rejection, a TypeError as in Node, with the reason in its message and
// cause.
func (x *execution) fetchError(msg string) goja.Value {
	e := x.rt.NewTypeError("fetch failed: " + msg)
	_ = e.Set("cause", x.newError("Error", msg))
	return e
}

func (x *execution) fetchResult(resp *FetchResponse) goja.Value {
	rt := x.rt
	o := rt.NewObject()
	_ = o.Set("status", resp.Status)
	_ = o.Set("statusText", resp.StatusText)
	_ = o.Set("url", resp.URL)
	_ = o.Set("redirected", resp.Redirected)
	names := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	var pairs []any
	for _, k := range names {
		for _, v := range resp.Header[k] {
			pairs = append(pairs, rt.NewArray(strings.ToLower(k), v))
		}
	}
	_ = o.Set("headers", rt.NewArray(pairs...))
	_ = o.Set("body", rt.NewArrayBuffer(resp.Body))
	return o
}

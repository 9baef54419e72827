package botrunner

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/dop251/goja"

	"github.com/fhirgate/fhirgate/internal/fhir"
)

// MedplumClient is the gateway's side of the handler's `medplum` argument: one FHIR request to
// the backend. The implementation adds the backend's credentials, the caller's identity headers
// and the run's trace id, sets Accept, and bounds the response size.
//
// path is relative to the FHIR base and already escaped, without a leading slash: "Patient/123",
// "Patient/123/_history/2", "Observation/$validate", or "" for a batch or transaction. query may
// be nil. body is nil for GET and DELETE; contentType is then "". header carries only extra
// request headers the operation needs (If-None-Exist) and may be nil.
//
// An error means the backend could not be asked (network failure, ctx done); every HTTP answer,
// 4xx and 5xx included, is returned as status, content type and body. ctx ends at the run's
// deadline.
type MedplumClient interface {
	Do(ctx context.Context, method, path string, query url.Values, body []byte, contentType string, header http.Header) (status int, respContentType string, respBody []byte, err error)
}

// medplumArg builds the handler's first argument. The client is made on first use: the argument
// is a dynamic object that builds the real client when a property is read, so bots that never
// call the backend do not pay for twenty-odd closures per run.
func (x *execution) medplumArg() goja.Value {
	return x.rt.NewDynamicObject(&lazyClient{x: x})
}

// lazyClient forwards property access to the client, built by its first use.
type lazyClient struct {
	x      *execution
	client *goja.Object
}

func (c *lazyClient) get() *goja.Object {
	if c.client == nil {
		c.client = c.x.newClient()
	}
	return c.client
}

func (c *lazyClient) Get(key string) goja.Value         { return c.get().Get(key) }
func (c *lazyClient) Set(key string, v goja.Value) bool { return c.get().Set(key, v) == nil }
func (c *lazyClient) Has(key string) bool               { return c.get().Get(key) != nil }
func (c *lazyClient) Delete(key string) bool            { return c.get().Delete(key) == nil }
func (c *lazyClient) Keys() []string                    { return c.get().Keys() }

// newClient evaluates client.js with the natives it calls.
func (x *execution) newClient() *goja.Object {
	rt := x.rt
	native := rt.NewObject()
	_ = native.Set("request", x.fn("request", x.fhirRequest))
	_ = native.Set("core", x.fn("core", func(goja.FunctionCall) goja.Value { return x.coreModule() }))
	_ = native.Set("queryString", x.fn("queryString", func(c goja.FunctionCall) goja.Value {
		return rt.ToValue(x.query(c.Argument(0)).Encode())
	}))
	_ = native.Set("withParam", x.fn("withParam", func(c goja.FunctionCall) goja.Value {
		vals := x.query(c.Argument(0))
		vals.Set(c.Argument(1).String(), c.Argument(2).String())
		return rt.ToValue(vals.Encode())
	}))
	_ = native.Set("requester", x.fn("requester", func(goja.FunctionCall) goja.Value {
		if r := x.req.Event.Requester; r != nil {
			return rt.ToValue(r.Reference)
		}
		return goja.Undefined()
	}))
	_ = native.Set("fhirBaseURL", rt.ToValue(x.req.FHIRBaseURL))
	_ = native.Set("fromBase64", x.fn("fromBase64", func(c goja.FunctionCall) goja.Value {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(c.Argument(0).String()))
		if err != nil {
			x.throwOutcome(fhir.NewOutcome(http.StatusBadGateway, "the FHIR backend answered a Binary whose data is not base64"))
		}
		return rt.ToValue(rt.NewArrayBuffer(b))
	}))
	return x.evalFactory(clientProgram(), native)
}

// noBackend is what every medplum call rejects with when the runner has no MedplumClient.
var noBackend = &fhir.Outcome{
	ResourceType: "OperationOutcome",
	Issue: []fhir.Issue{{
		Severity: "error",
		Code:     "not-supported",
		Details:  &fhir.Text{Text: "no FHIR backend is configured for bots"},
	}},
}

// fhirRequest is native.request(method, path, query, body, contentType, headers): it calls the
// MedplumClient and returns {status, contentType, body}, or throws an OperationOutcomeError when
// the backend could not be asked.
func (x *execution) fhirRequest(call goja.FunctionCall) goja.Value {
	method := call.Argument(0).String()
	path, pathQuery, err := fhirPath(call.Argument(1).String())
	if err != nil {
		x.throwOutcome(fhir.NewOutcome(http.StatusBadRequest, err.Error()))
	}
	query := x.query(call.Argument(2))
	for k, vs := range pathQuery {
		for _, v := range vs {
			query.Add(k, v)
		}
	}
	if len(query) == 0 {
		query = nil
	}
	var body []byte
	contentType := ""
	if b := call.Argument(3); !goja.IsUndefined(b) && !goja.IsNull(b) {
		if ab, ok := b.Export().(goja.ArrayBuffer); ok {
			body = ab.Bytes() // createBinary's bytes, sent as they are
		} else {
			body = []byte(b.String())
		}
		contentType = call.Argument(4).String()
	}
	var header http.Header
	if h, ok := call.Argument(5).(*goja.Object); ok {
		header = http.Header{}
		for _, k := range h.Keys() {
			header.Set(k, h.Get(k).String())
		}
	}
	if x.req.Medplum == nil {
		x.throwOutcome(noBackend)
	}
	ctx, cancel := context.WithDeadline(x.ctx, x.start.Add(x.timeout))
	defer cancel()
	status, ct, resp, err := x.req.Medplum.Do(ctx, method, path, query, body, contentType, header)
	if err != nil {
		if ctx.Err() != nil {
			// The run's time is up (or its caller left): end it as such, not as a failed call.
			x.stopFor(x.ctx)
		}
		// A *url.Error repeats the backend URL, query (and so search parameters) included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		x.throwOutcome(fhir.NewOutcome(http.StatusBadGateway, "FHIR backend request failed: "+err.Error()))
	}
	res := x.rt.NewObject()
	_ = res.Set("status", status)
	_ = res.Set("contentType", ct)
	_ = res.Set("body", string(resp))
	return res
}

// throwOutcome throws '@medplum/core's OperationOutcomeError into the calling JavaScript.
func (x *execution) throwOutcome(o *fhir.Outcome) {
	errObj, err := x.rt.New(x.coreModule().Get("OperationOutcomeError"), x.outcome(o))
	if err != nil {
		panic(err)
	}
	panic(errObj)
}

// outcome turns an OperationOutcome into a plain JavaScript object.
func (x *execution) outcome(o *fhir.Outcome) goja.Value {
	return x.jsonValue(mustJSON(o))
}

// query converts a Medplum query argument (a string, a URLSearchParams, an array of pairs or a
// record whose values may be arrays) into url.Values.
func (x *execution) query(v goja.Value) url.Values {
	vals := url.Values{}
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return vals
	}
	o, isObj := v.(*goja.Object)
	if !isObj || isSearchParams(o) {
		q, err := url.ParseQuery(strings.TrimPrefix(v.String(), "?"))
		if err != nil {
			x.throwOutcome(fhir.NewOutcome(http.StatusBadRequest, "invalid search query: "+err.Error()))
		}
		return q
	}
	if o.ClassName() == "Array" {
		for _, k := range o.Keys() {
			pair, ok := o.Get(k).(*goja.Object)
			if !ok {
				continue
			}
			vals.Add(pair.Get("0").String(), pair.Get("1").String())
		}
		return vals
	}
	for _, k := range o.Keys() {
		val := o.Get(k)
		if goja.IsUndefined(val) || goja.IsNull(val) {
			continue
		}
		if arr, ok := val.(*goja.Object); ok && arr.ClassName() == "Array" {
			for _, i := range arr.Keys() {
				vals.Add(k, arr.Get(i).String())
			}
			continue
		}
		vals.Add(k, val.String())
	}
	return vals
}

// isSearchParams recognises a URLSearchParams by its methods; its string form is the query.
func isSearchParams(o *goja.Object) bool {
	_, hasGetAll := goja.AssertFunction(o.Get("getAll"))
	_, hasAppend := goja.AssertFunction(o.Get("append"))
	return hasGetAll && hasAppend
}

// fhirPath turns a bot-supplied URL or path into a path relative to the FHIR base plus its query.
// Absolute URLs keep only their path, and Medplum's "fhir/R4/" prefix is dropped, so
// medplum.get('fhir/R4/Patient/1') and medplum.get('Patient/1') are the same request. A path
// that could climb out of the FHIR base at a decoding backend is refused (fhir.CheckBotPath).
func fhirPath(raw string) (string, url.Values, error) {
	if strings.ContainsAny(raw, "\\#\x00\r\n\t ") {
		return "", nil, fmt.Errorf("invalid FHIR path '%s'", truncate(raw, 100))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", nil, fmt.Errorf("invalid FHIR path '%s'", truncate(raw, 100))
	}
	p := u.EscapedPath()
	p = strings.TrimPrefix(p, "/")
	for _, prefix := range []string{"api/fhir/R4/", "fhir/R4/"} {
		if strings.HasPrefix(p, prefix) {
			p = p[len(prefix):]
			break
		}
	}
	if p == "fhir/R4" || p == "api/fhir/R4" {
		p = ""
	}
	if err := fhir.CheckBotPath(p); err != nil {
		return "", nil, err
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", nil, fmt.Errorf("invalid query in FHIR path: %w", err)
	}
	return p, q, nil
}

package botrunner

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
)

// A bot's fetch under process isolation: the worker asks the gateway with a fetch frame and
// goes on running the bot; the gateway makes the request with the run's Fetcher on a goroutine
// of its own and answers with a fetched frame whenever it is done, so the fetches of one run
// overlap as they do in process.

// noEgress is why a fetch rejects when the run has no Fetcher.
const noEgress = "fetch is not available: the gateway gives this bot no egress"

// fetchMsg is a fetch call from the bot (frameFetch).
type fetchMsg struct {
	id, call uint64
	req      FetchRequest
	hasBody  bool
}

func (m *fetchMsg) encode(e *encoder) {
	e.uint(m.id)
	e.uint(m.call)
	e.str(m.req.Method)
	e.str(m.req.URL)
	e.header(m.req.Header)
	e.bool(m.req.Body != nil)
	e.bytes(m.req.Body)
	e.str(m.req.Redirect)
}

func (m *fetchMsg) decode(d *decoder) error {
	m.id = d.uint()
	m.call = d.uint()
	m.req.Method = d.str()
	m.req.URL = d.str()
	m.req.Header = d.header()
	m.hasBody = d.bool()
	m.req.Body = d.bytes()
	if !m.hasBody {
		m.req.Body = nil
	}
	m.req.Redirect = d.str()
	return d.done()
}

// fetchedMsg is the gateway's answer to a fetch call (frameFetched).
type fetchedMsg struct {
	id, call uint64
	resp     FetchResponse
	err      string // no HTTP answer; "" when there is one
}

func (m *fetchedMsg) encode(e *encoder) {
	e.uint(m.id)
	e.uint(m.call)
	e.int(int64(m.resp.Status))
	e.str(m.resp.StatusText)
	e.str(m.resp.URL)
	e.bool(m.resp.Redirected)
	e.header(m.resp.Header)
	e.bytes(m.resp.Body)
	e.str(m.err)
}

func (m *fetchedMsg) decode(d *decoder) error {
	m.id = d.uint()
	m.call = d.uint()
	m.resp.Status = int(d.int())
	m.resp.StatusText = d.str()
	m.resp.URL = d.str()
	m.resp.Redirected = d.bool()
	m.resp.Header = d.header()
	m.resp.Body = d.bytes()
	m.err = d.str()
	return d.done()
}

// rpcFetcher is a worker run's Fetcher: it asks the pool, which asks the run's real one.
type rpcFetcher struct {
	s     *workerServer
	id    uint64
	calls callTable[*fetchedMsg]
}

func (f *rpcFetcher) Fetch(ctx context.Context, req *FetchRequest) (*FetchResponse, error) {
	if len(req.Body) > f.s.maxFrame-frameOverhead {
		return nil, fmt.Errorf("the request body of %d bytes is larger than a bot worker may send", len(req.Body))
	}
	a, err := f.calls.call(ctx, func(call uint64) error {
		m := fetchMsg{id: f.id, call: call, req: *req}
		return f.s.out.send(frameFetch, m.encode)
	})
	if err != nil {
		return nil, err
	}
	if a.err != "" {
		return nil, errors.New(a.err)
	}
	return &a.resp, nil
}

// serveFetch makes a bot's fetch with the run's Fetcher and answers the worker.
func (w *worker) serveFetch(r *poolRun, m *fetchMsg) {
	a := fetchedMsg{id: m.id, call: m.call}
	ctx, cancel := context.WithDeadline(r.ctx, r.deadline)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			w.p.logger.Error("bot fetch panicked", zap.Int("pid", w.pid), zap.Any("panic", p))
			a = fetchedMsg{id: m.id, call: m.call, err: "internal error in the gateway's fetch"}
		}
		if ctx.Err() != nil {
			// The run is over (its deadline, which the worker keeps itself and which started
			// there a little later, or a cancel frame): no answer, so the bot is not told its
			// fetch failed before its own deadline ends it as timed out.
			return
		}
		_ = w.out.send(frameFetched, a.encode)
	}()
	if r.req.Fetch == nil {
		a.err = noEgress
		return
	}
	if len(m.req.Body) > MaxFetchBodyBytes {
		a.err = fmt.Sprintf("the request body of %d bytes is larger than fetch may send (%d bytes)", len(m.req.Body), MaxFetchBodyBytes)
		return
	}
	resp, err := r.req.Fetch.Fetch(ctx, &m.req)
	switch {
	case err != nil:
		a.err = fetchErrorMessage(ctx, err)
	case len(resp.Body) > maxParentFrame-frameOverhead:
		a.err = fmt.Sprintf("the response of %d bytes is larger than a bot worker may receive", len(resp.Body))
	default:
		a.resp = *resp
	}
}

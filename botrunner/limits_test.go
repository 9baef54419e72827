package botrunner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tests of Slots, the fair queue of run slots. Waiting runs are observed through the queue's
// state, never by sleeping; the only times are queue timeouts, generous where a run must not
// time out and short where it must.

// queued is how many runs wait in the fair queue.
func queued(s *Slots) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.ring {
		for _, u := range p.ring {
			n += len(u.waiters)
		}
	}
	return n
}

// slotRun is a run acquiring slots in the background.
type slotRun struct {
	name string
	h    *hold
	err  error
	done chan struct{}
}

// acquireAsync starts acquiring a slot for req and returns once the run holds one or waits in
// the fair queue; a run granted a slot is sent on granted.
func acquireAsync(t *testing.T, ctx context.Context, s *Slots, name string, req Request, granted chan<- *slotRun) *slotRun {
	t.Helper()
	r := &slotRun{name: name, done: make(chan struct{})}
	before := queued(s)
	go func() {
		defer close(r.done)
		r.h, r.err = s.acquire(ctx, &req)
		if r.err == nil && granted != nil {
			granted <- r
		}
	}()
	waitFor(t, func() bool {
		select {
		case <-r.done:
			return true
		default:
			return queued(s) == before+1
		}
	})
	return r
}

// mustAcquire takes a slot at once or fails the test.
func mustAcquire(t *testing.T, s *Slots, req Request) *hold {
	t.Helper()
	h, err := s.acquire(ctxT(t), &req)
	if err != nil {
		t.Fatalf("acquire(%s/%s): %v", req.Project, req.User, err)
	}
	return h
}

// grantOrder releases first, then each run granted in turn, and returns the names in the
// order they were granted.
func grantOrder(t *testing.T, first *hold, granted <-chan *slotRun, n int) []string {
	t.Helper()
	var order []string
	first.release()
	for range n {
		select {
		case r := <-granted:
			order = append(order, r.name)
			r.h.release()
		case <-time.After(10 * time.Second):
			t.Fatalf("no run granted after %v", order)
		}
	}
	return order
}

func TestSlotsServeProjectsInTurn(t *testing.T) {
	s := NewSlots(Limits{MaxConcurrent: 1, ProjectMaxConcurrent: 1, QueueTimeout: time.Minute})
	holder := mustAcquire(t, s, Request{Project: "a", User: "u"})
	granted := make(chan *slotRun, 10)
	// Project a queues three runs before b and c queue one each.
	for _, q := range []struct{ name, project string }{{"a1", "a"}, {"a2", "a"}, {"a3", "a"}, {"b1", "b"}, {"c1", "c"}} {
		acquireAsync(t, ctxT(t), s, q.name, Request{Project: q.project, User: "u"}, granted)
	}
	got := strings.Join(grantOrder(t, holder, granted, 5), " ")
	if want := "a1 b1 c1 a2 a3"; got != want {
		t.Errorf("grant order = %s, want %s", got, want)
	}
	if s.Running() != 0 || queued(s) != 0 || len(s.projects) != 0 {
		t.Errorf("after all runs: running %d, queued %d, projects %d", s.Running(), queued(s), len(s.projects))
	}
}

func TestSlotsServeUsersOfAProjectInTurn(t *testing.T) {
	s := NewSlots(Limits{MaxConcurrent: 1, ProjectMaxConcurrent: 1, QueueTimeout: time.Minute})
	holder := mustAcquire(t, s, Request{Project: "a", User: "u1"})
	granted := make(chan *slotRun, 10)
	for _, q := range []struct{ name, user string }{{"u1a", "u1"}, {"u1b", "u1"}, {"u1c", "u1"}, {"u2a", "u2"}, {"u3a", "u3"}, {"u2b", "u2"}} {
		acquireAsync(t, ctxT(t), s, q.name, Request{Project: "a", User: q.user}, granted)
	}
	got := strings.Join(grantOrder(t, holder, granted, 6), " ")
	if want := "u1a u2a u3a u1b u2b u1c"; got != want {
		t.Errorf("grant order = %s, want %s", got, want)
	}
}

func TestSlotsBoundEachProject(t *testing.T) {
	s := NewSlots(Limits{MaxConcurrent: 4, ProjectMaxConcurrent: 2, QueueTimeout: time.Minute})
	a1 := mustAcquire(t, s, Request{Project: "a"})
	a2 := mustAcquire(t, s, Request{Project: "a"})
	granted := make(chan *slotRun, 10)
	a3 := acquireAsync(t, ctxT(t), s, "a3", Request{Project: "a"}, granted)
	// a is at its bound with two slots free: b still starts at once, twice.
	b1 := mustAcquire(t, s, Request{Project: "b"})
	b2 := mustAcquire(t, s, Request{Project: "b"})
	if s.Running() != 4 || queued(s) != 1 {
		t.Fatalf("running %d, queued %d; want 4, 1", s.Running(), queued(s))
	}
	// A slot b frees is not a's: a is still at its bound.
	b1.release()
	if queued(s) != 1 || s.Running() != 3 {
		t.Fatalf("after b1 ended: running %d, queued %d; want 3, 1", s.Running(), queued(s))
	}
	b3 := mustAcquire(t, s, Request{Project: "b"})
	a1.release()
	<-a3.done
	if a3.err != nil {
		t.Fatalf("a3: %v", a3.err)
	}
	for _, h := range []*hold{a2, a3.h, b2, b3} {
		h.release()
	}
	if s.Running() != 0 {
		t.Errorf("running %d after every release", s.Running())
	}
}

func TestSlotsDefaultProjectBound(t *testing.T) {
	for _, c := range []struct{ max, project, want int }{{8, 0, 4}, {1, 0, 1}, {3, 0, 1}, {8, -1, 8}, {8, 20, 8}, {8, 3, 3}} {
		if got := NewSlots(Limits{MaxConcurrent: c.max, ProjectMaxConcurrent: c.project}).Limits().ProjectMaxConcurrent; got != c.want {
			t.Errorf("max %d, project %d: project bound %d, want %d", c.max, c.project, got, c.want)
		}
	}
}

func TestSlotsQueueTimeoutIsBusy(t *testing.T) {
	s := NewSlots(Limits{MaxConcurrent: 1, QueueTimeout: 20 * time.Millisecond})
	holder := mustAcquire(t, s, Request{Project: "a", User: "u"})
	for _, project := range []string{"a", "b"} {
		if _, err := s.acquire(ctxT(t), &Request{Project: project, User: "v"}); !errors.Is(err, ErrBusy) {
			t.Errorf("project %s: err = %v, want ErrBusy", project, err)
		}
	}
	if queued(s) != 0 || len(s.ring) != 0 || len(s.projects) != 1 {
		t.Errorf("timed-out runs left state: queued %d, ring %d, projects %d", queued(s), len(s.ring), len(s.projects))
	}
	holder.release()
	mustAcquire(t, s, Request{Project: "b"}).release()
}

func TestSlotsCancelledWaiterGivesUpItsPlace(t *testing.T) {
	s := NewSlots(Limits{MaxConcurrent: 1, QueueTimeout: time.Minute})
	holder := mustAcquire(t, s, Request{Project: "a"})
	granted := make(chan *slotRun, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := acquireAsync(t, ctx, s, "gone", Request{Project: "b"}, granted)
	next := acquireAsync(t, ctxT(t), s, "next", Request{Project: "c"}, granted)
	cancel()
	<-gone.done
	if !errors.Is(gone.err, context.Canceled) || queued(s) != 1 {
		t.Fatalf("cancelled waiter: err %v, queued %d; want context.Canceled, 1", gone.err, queued(s))
	}
	if got := grantOrder(t, holder, granted, 1); got[0] != "next" {
		t.Errorf("granted %v, want next", got)
	}
	<-next.done
	if s.Running() != 0 || len(s.projects) != 0 {
		t.Errorf("running %d, projects %d after all ended", s.Running(), len(s.projects))
	}
}

func TestSlotsPerBotBoundHoldsNoQueuePlace(t *testing.T) {
	s := NewSlots(Limits{MaxConcurrent: 2, ProjectMaxConcurrent: -1, QueueTimeout: time.Minute})
	x1 := mustAcquire(t, s, Request{Project: "a", BotID: "x", MaxConcurrent: 1})
	// A second run of x waits for x's own bound, holding no slot and no place in the queue.
	x2 := &slotRun{done: make(chan struct{})}
	go func() {
		defer close(x2.done)
		x2.h, x2.err = s.acquire(ctxT(t), &Request{Project: "a", BotID: "x", MaxConcurrent: 1})
	}()
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.perBot["x"] != nil && s.perBot["x"].refs == 2
	})
	if s.Running() != 1 || queued(s) != 0 {
		t.Errorf("run waiting for its bot: running %d, queued %d; want 1, 0", s.Running(), queued(s))
	}
	y := mustAcquire(t, s, Request{Project: "a", BotID: "y", MaxConcurrent: 1})
	y.release()
	x1.release()
	<-x2.done
	if x2.err != nil {
		t.Fatalf("x2: %v", x2.err)
	}
	x2.h.release()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.perBot) != 0 || s.running != 0 {
		t.Errorf("left: perBot %d, running %d", len(s.perBot), s.running)
	}
}

func TestSlotsPerBotBoundTimesOut(t *testing.T) {
	s := NewSlots(Limits{MaxConcurrent: 4, QueueTimeout: 20 * time.Millisecond})
	x := mustAcquire(t, s, Request{Project: "a", BotID: "x", MaxConcurrent: 1})
	if _, err := s.acquire(ctxT(t), &Request{Project: "b", BotID: "x", MaxConcurrent: 1}); !errors.Is(err, ErrBusy) {
		t.Errorf("second run of x: err = %v, want ErrBusy", err)
	}
	x.release()
}

func TestSlotsLendToABotToBotCall(t *testing.T) {
	s := NewSlots(Limits{MaxConcurrent: 1, QueueTimeout: 20 * time.Millisecond})
	parent := mustAcquire(t, s, Request{Project: "a", BotID: "p", MaxConcurrent: 1})

	// The call runs on its caller's slot, even of the caller's own bot at its bound.
	child, err := s.acquire(parent.ctx, &Request{Project: "a", BotID: "p", MaxConcurrent: 1, InheritSlot: true})
	if err != nil {
		t.Fatalf("bot-to-bot call: %v", err)
	}
	if s.Running() != 1 {
		t.Errorf("running %d with a lent slot, want 1", s.Running())
	}
	// Its own call, one level deeper, borrows the child's slot.
	grandchild, err := s.acquire(child.ctx, &Request{Project: "a", BotID: "q", InheritSlot: true})
	if err != nil {
		t.Fatalf("call from the call: %v", err)
	}
	// The parent's slot is lent: a second call at once queues like any run.
	if _, err := s.acquire(parent.ctx, &Request{Project: "a", BotID: "r", InheritSlot: true}); !errors.Is(err, ErrBusy) {
		t.Errorf("second concurrent call: err = %v, want ErrBusy", err)
	}
	// Not marked: queues, as does a marked run with no caller.
	if _, err := s.acquire(parent.ctx, &Request{Project: "a", BotID: "r"}); !errors.Is(err, ErrBusy) {
		t.Errorf("unmarked run: err = %v, want ErrBusy", err)
	}
	if _, err := s.acquire(ctxT(t), &Request{Project: "a", BotID: "r", InheritSlot: true}); !errors.Is(err, ErrBusy) {
		t.Errorf("marked run without a caller: err = %v, want ErrBusy", err)
	}
	grandchild.release()
	child.release()
	// Given back: the next call borrows again.
	again, err := s.acquire(parent.ctx, &Request{Project: "a", BotID: "r", InheritSlot: true})
	if err != nil {
		t.Fatalf("call after the first ended: %v", err)
	}
	again.release()
	parent.release()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running != 0 || len(s.perBot) != 0 || len(s.projects) != 0 {
		t.Errorf("left: running %d, perBot %d, projects %d", s.running, len(s.perBot), len(s.projects))
	}
}

func TestSlotsSetLimitsAppliesToQueuedRuns(t *testing.T) {
	s := NewSlots(Limits{MaxConcurrent: 1, QueueTimeout: time.Minute})
	holder := mustAcquire(t, s, Request{Project: "a"})
	granted := make(chan *slotRun, 10)
	b := acquireAsync(t, ctxT(t), s, "b", Request{Project: "b"}, granted)
	s.SetLimits(Limits{MaxConcurrent: 2, QueueTimeout: time.Minute})
	<-b.done
	if b.err != nil || s.Running() != 2 {
		t.Fatalf("after raising the bound: err %v, running %d", b.err, s.Running())
	}
	// Lowered below what runs: runs go on, new ones wait for the excess to end.
	s.SetLimits(Limits{MaxConcurrent: 1, QueueTimeout: time.Minute})
	c := acquireAsync(t, ctxT(t), s, "c", Request{Project: "c"}, granted)
	holder.release()
	if queued(s) != 1 {
		t.Errorf("queued %d with 1 running at a bound of 1, want 1", queued(s))
	}
	b.h.release()
	<-c.done
	if c.err != nil {
		t.Fatal(c.err)
	}
	c.h.release()
}

func TestRunTimeoutIsBoundedByMaxTimeout(t *testing.T) {
	for _, c := range []struct {
		lim       Limits
		req, want time.Duration
	}{
		{Limits{}, 0, DefaultTimeout},
		{Limits{}, time.Hour, DefaultMaxTimeout},
		{Limits{MaxTimeout: time.Minute}, 0, DefaultTimeout},
		{Limits{MaxTimeout: time.Minute, DefaultTimeout: time.Hour}, 0, time.Minute},
		{Limits{MaxTimeout: time.Minute}, 2 * time.Minute, time.Minute},
		{Limits{MaxTimeout: -1}, time.Hour, time.Hour},
	} {
		if got := c.lim.WithDefaults().runTimeout(c.req); got != c.want {
			t.Errorf("%+v, request %v: timeout %v, want %v", c.lim, c.req, got, c.want)
		}
	}
}

func TestRunnerCutsTimeoutToMaxTimeout(t *testing.T) {
	r := New(Options{MaxTimeout: 50 * time.Millisecond})
	res, err := r.Run(ctxT(t), Request{Code: `exports.handler = () => { for (;;) {} }`, Timeout: time.Hour})
	if err != nil || res.Outcome != OutcomeTimeout {
		t.Fatalf("looping run: %+v, %v", res, err)
	}
	// Generous: the bound is 50 ms, the asked-for timeout an hour.
	if res.Duration > 10*time.Second {
		t.Errorf("run lasted %v", res.Duration)
	}
}

func TestPoolCutsTimeoutToMaxTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	p := newTestPool(t, PoolOptions{Options: Options{MaxTimeout: 50 * time.Millisecond}})
	res, err := p.Run(ctxT(t), Request{Code: `exports.handler = () => { for (;;) {} }`, Timeout: time.Hour})
	if err != nil || res.Outcome != OutcomeTimeout {
		t.Fatalf("looping run: %+v, %v", res, err)
	}
	if res.Duration > 10*time.Second { // generous, as above
		t.Errorf("run lasted %v", res.Duration)
	}
}

// botCaller is a MedplumClient that answers Bot/{id}/$execute by running the bot named in the
// path through exec, as botapi does for medplum.executeBot, marking the run as a bot-to-bot
// call.
type botCaller struct {
	exec  func() Executor
	code  map[string]string
	mark  bool
	calls chan string
}

func (c *botCaller) Do(ctx context.Context, _, path string, _ url.Values, body []byte, contentType string, _ http.Header) (int, string, []byte, error) {
	bot := strings.TrimSuffix(strings.TrimPrefix(path, "Bot/"), "/$execute")
	in, err := ParseInput(contentType, body)
	if err != nil {
		return 0, "", nil, err
	}
	res, err := c.exec().Run(ctx, Request{
		CacheKey: bot, Code: c.code[bot], BotID: bot, MaxConcurrent: 1, Project: "a", User: "u",
		InheritSlot: c.mark, Medplum: c, Timeout: 5 * time.Second,
		Event: Event{ContentType: contentType, Input: in},
	})
	if err != nil {
		return 429, ContentTypeFHIR, []byte(fmt.Sprintf(`{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"throttled","diagnostics":%q}]}`, err.Error())), nil
	}
	return 200, res.ContentType, res.Body, nil
}

// chainBots are three bots: top calls mid, which calls itself once and then leaf.
var chainBots = map[string]string{
	"top": `exports.handler = async (medplum) => 'top(' + await medplum.post('Bot/mid/$execute', {}, 'application/json') + ')'`,
	"mid": `exports.handler = async (medplum, event) => event.input.again ? 'mid' :
	  'mid(' + await medplum.post('Bot/mid/$execute', {again: true}, 'application/json') + ',' +
	  await medplum.post('Bot/leaf/$execute', {}, 'application/json') + ')'`,
	"leaf": `exports.handler = () => 'leaf'`,
}

// testBotToBotAtTheCap runs top with one slot per project: each call must borrow its
// caller's slot, or it waits behind its caller until QueueTimeout.
func testBotToBotAtTheCap(t *testing.T, exec func(mark bool) Executor) {
	for _, mark := range []bool{true, false} {
		e := exec(mark)
		c := &botCaller{exec: func() Executor { return e }, code: chainBots, mark: mark}
		res, err := e.Run(ctxT(t), Request{CacheKey: "top", Code: chainBots["top"], BotID: "top", MaxConcurrent: 1, Project: "a", User: "u", Medplum: c, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("mark %v: %v", mark, err)
		}
		switch got := string(res.Body); {
		case mark && got != "top(mid(mid,leaf))":
			t.Errorf("marked calls: body %s (outcome %v, %s), want top(mid(mid,leaf))", got, res.Outcome, res.Message)
		case !mark && res.Message != "Too Many Requests":
			// The check that the test can fail: unmarked, the first call waits behind its caller.
			t.Errorf("unmarked calls: outcome %v, %s; want the call refused as busy", res.Outcome, res.Message)
		}
	}
}

func TestRunnerBotToBotCallBorrowsTheCallersSlot(t *testing.T) {
	testBotToBotAtTheCap(t, func(bool) Executor {
		return New(Options{MaxConcurrent: 2, ProjectMaxConcurrent: 1, QueueTimeout: 100 * time.Millisecond})
	})
}

func TestPoolBotToBotCallBorrowsTheCallersSlot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	testBotToBotAtTheCap(t, func(bool) Executor {
		return newTestPool(t, PoolOptions{Options: Options{MaxConcurrent: 2, ProjectMaxConcurrent: 1, QueueTimeout: 100 * time.Millisecond}})
	})
}

// TestRunnerProjectFindsASlotWhileAnotherFloods fills project a's share with looping runs and
// queues more of them; project b's runs still start at once.
func TestRunnerProjectFindsASlotWhileAnotherFloods(t *testing.T) {
	r := New(Options{MaxConcurrent: 4, QueueTimeout: 2 * time.Second})
	loop := `exports.handler = () => { for (;;) {} }`
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = r.Run(ctxT(t), Request{Code: loop, Project: "a", User: fmt.Sprint("u", i%2), Timeout: 300 * time.Millisecond})
		}()
	}
	waitFor(t, func() bool { return r.slots.Running() == 2 && queued(r.slots) > 0 })
	for i := range 5 {
		res, err := r.Run(ctxT(t), Request{Code: `exports.handler = () => 'b'`, Project: "b", User: "v"})
		if err != nil || string(res.Body) != "b" {
			t.Fatalf("project b run %d: %+v, %v", i, res, err)
		}
		if res.QueueWait > time.Second { // generous: b never queues
			t.Errorf("project b run %d queued %v", i, res.QueueWait)
		}
	}
	wg.Wait()
}

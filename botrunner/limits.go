package botrunner

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxTimeout is the largest run timeout by default (Limits.MaxTimeout): Medplum's own
// bound on Bot.timeout.
const DefaultMaxTimeout = 15 * time.Minute

// Limits are the bounds of runs that may change while runs go on (Slots.SetLimits). The zero
// value of each field means its default.
type Limits struct {
	// MaxConcurrent bounds simultaneous runs across all bots. Default: 4 × GOMAXPROCS.
	MaxConcurrent int
	// ProjectMaxConcurrent bounds the runs of one project (Request.Project), so that another
	// project always finds a slot. Default: half of MaxConcurrent, at least 1; negative: no
	// bound but MaxConcurrent. Runs with no Project are bound by MaxConcurrent only.
	ProjectMaxConcurrent int
	// QueueTimeout is how long a run waits for a slot before Run returns ErrBusy. Default: 1s.
	QueueTimeout time.Duration
	// DefaultTimeout is the wall-clock limit of a run whose Request has none. Default: 10s.
	DefaultTimeout time.Duration
	// MaxTimeout bounds every run's wall-clock limit: a longer Request.Timeout (or
	// DefaultTimeout) is cut to it. Default: 15m; negative: no bound.
	MaxTimeout time.Duration
}

// WithDefaults returns l with its zero fields set to their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxConcurrent <= 0 {
		l.MaxConcurrent = 4 * runtime.GOMAXPROCS(0)
	}
	switch {
	case l.ProjectMaxConcurrent == 0:
		l.ProjectMaxConcurrent = max(l.MaxConcurrent/2, 1)
	case l.ProjectMaxConcurrent < 0 || l.ProjectMaxConcurrent > l.MaxConcurrent:
		l.ProjectMaxConcurrent = l.MaxConcurrent
	}
	if l.QueueTimeout <= 0 {
		l.QueueTimeout = DefaultQueueTimeout
	}
	if l.DefaultTimeout <= 0 {
		l.DefaultTimeout = DefaultTimeout
	}
	if l.MaxTimeout == 0 {
		l.MaxTimeout = DefaultMaxTimeout
	}
	return l
}

// runTimeout is the wall-clock limit of a run that asks for t (0: the default).
func (l Limits) runTimeout(t time.Duration) time.Duration {
	if t <= 0 {
		t = l.DefaultTimeout
	}
	if l.MaxTimeout > 0 && t > l.MaxTimeout {
		t = l.MaxTimeout
	}
	return t
}

// Slots hands out run slots to Runners and Pools: at most MaxConcurrent runs at once, at most
// ProjectMaxConcurrent of one project, and at most Request.MaxConcurrent of one bot. A run that
// finds no slot queues, for QueueTimeout at most (then ErrBusy), so a flood of runs turns into
// 429s instead of a growing queue.
//
// The queue is fair: when a slot frees, it goes to the next project in rotation that has a run
// waiting and is below its bound, and within that project to the next user in rotation, so one
// project (or one user) queueing many runs delays the others by one turn at most. A run waiting
// for its bot's own bound (Request.MaxConcurrent) waits outside this queue and holds no place in
// it.
//
// One Slots may serve several executors (Options.Slots), so that replacing an executor (say
// when the isolation mode changes on a config reload) does not add slots. It is safe for
// concurrent use.
type Slots struct {
	mu       sync.Mutex
	lim      Limits
	running  int                      // slots taken, lent ones not counted
	projects map[string]*projectQueue // projects running or waiting
	ring     []*projectQueue          // projects with runs waiting, in turn order
	next     int                      // the index in ring whose turn is next
	perBot   map[string]*botSlots
}

// NewSlots returns Slots with l's zero fields set to their defaults.
func NewSlots(l Limits) *Slots {
	return &Slots{lim: l.WithDefaults(), projects: map[string]*projectQueue{}, perBot: map[string]*botSlots{}}
}

// SetLimits changes the limits for runs from now on. Runs going on keep their slots and
// deadlines; a lower MaxConcurrent is reached as they end, a higher one lets queued runs start
// at once.
func (s *Slots) SetLimits(l Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lim = l.WithDefaults()
	s.dispatch()
}

// Limits returns the limits in force, defaults filled in.
func (s *Slots) Limits() Limits {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lim
}

// Running is how many slots are taken (a slot lent to a bot-to-bot call counts once).
func (s *Slots) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// projectQueue is one project's running count and its queued runs, by user.
type projectQueue struct {
	name    string
	running int
	users   map[string]*userQueue // users with runs waiting
	ring    []*userQueue          // the same users, in turn order
	next    int
}

type userQueue struct {
	name    string
	waiters []*waiter // first come first
}

// waiter is a queued run; ready is closed when it is granted a slot.
type waiter struct {
	p       *projectQueue
	u       *userQueue
	ready   chan struct{}
	granted bool // guarded by Slots.mu
}

// lease is a run's slot as its bot-to-bot calls see it (through the run's context): a call
// marked InheritSlot runs on the slot of the run that made it, which waits for it meanwhile.
// One call at a time: a second concurrent call (which a bot's synchronous medplum calls never
// make) queues for a slot of its own.
type lease struct {
	bots []string // the bot of this run and of the runs that lent it their slot
	lent atomic.Bool
}

type leaseKey struct{}

// hold is a run's slot: release gives it back, ctx carries its lease to the run's medplum calls.
type hold struct {
	s       *Slots
	p       *projectQueue // nil when the slot is borrowed
	borrow  *lease        // the parent's lease, when borrowed
	botID   string
	bot     *botSlots
	lim     Limits // as of the acquisition
	ctx     context.Context
	release func()
}

// acquire takes a slot for req: the bot's own (when req.MaxConcurrent > 0), then a fair-queue
// slot of req's project, or, for a call marked InheritSlot from a run whose lease is free, that
// run's slot. Waiting for both together is bounded by QueueTimeout.
func (s *Slots) acquire(ctx context.Context, req *Request) (*hold, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h := &hold{s: s, botID: req.BotID, lim: s.Limits()}
	var parent *lease
	if req.InheritSlot {
		if l, ok := ctx.Value(leaseKey{}).(*lease); ok && l.lent.CompareAndSwap(false, true) {
			h.borrow, parent = l, l
		}
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	// expired starts the queue timer on first use: a run that finds its slots free starts none.
	expired := func() <-chan time.Time {
		if timer == nil {
			timer = time.NewTimer(h.lim.QueueTimeout)
		}
		return timer.C
	}
	// A borrowed slot skips the bot's bound when a lender runs the same bot: the lender holds
	// one of its slots and waits for this call, which would otherwise wait for the lender.
	if req.MaxConcurrent > 0 && (parent == nil || !slices.Contains(parent.bots, req.BotID)) {
		h.bot = s.botSlots(req.BotID, req.MaxConcurrent)
		if err := h.bot.take(ctx, expired); err != nil {
			s.dropBot(req.BotID, h.bot)
			h.unborrow()
			return nil, err
		}
	}
	if parent == nil {
		p, err := s.take(ctx, req.Project, req.User, expired)
		if err != nil {
			h.releaseBot()
			return nil, err
		}
		h.p = p
	}
	var bots []string
	if parent != nil {
		bots = parent.bots
	}
	h.ctx = context.WithValue(ctx, leaseKey{}, &lease{bots: append(slices.Clip(bots), req.BotID)})
	var once sync.Once
	h.release = func() { once.Do(h.free) }
	return h, nil
}

// free gives the slots of h back.
func (h *hold) free() {
	if h.p != nil {
		h.s.mu.Lock()
		h.s.running--
		h.p.running--
		h.s.dropProject(h.p)
		h.s.dispatch()
		h.s.mu.Unlock()
	}
	h.unborrow()
	h.releaseBot()
}

func (h *hold) unborrow() {
	if h.borrow != nil {
		h.borrow.lent.Store(false)
		h.borrow = nil
	}
}

func (h *hold) releaseBot() {
	if h.bot != nil {
		<-h.bot.ch
		h.s.dropBot(h.botID, h.bot)
		h.bot = nil
	}
}

// take takes a slot for a run of project and user, queueing when none is free.
func (s *Slots) take(ctx context.Context, project, user string, expired func() <-chan time.Time) (*projectQueue, error) {
	s.mu.Lock()
	p := s.projects[project]
	if p == nil {
		p = &projectQueue{name: project, users: map[string]*userQueue{}}
		s.projects[project] = p
	}
	// Queued runs are all ineligible (see dispatch), so a run that fits takes no one's turn.
	if s.fits(p) {
		s.running++
		p.running++
		s.mu.Unlock()
		return p, nil
	}
	w := s.enqueue(p, user)
	s.mu.Unlock()

	var err error
	select {
	case <-w.ready:
		return p, nil
	case <-expired():
		err = ErrBusy
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.granted {
		// Granted as the wait ended: give the slot to the next in turn.
		s.running--
		p.running--
	} else {
		s.dequeue(w)
	}
	s.dropProject(p)
	s.dispatch()
	return nil, err
}

// fits says whether a run of p may start now. s.mu is held.
func (s *Slots) fits(p *projectQueue) bool {
	return s.running < s.lim.MaxConcurrent && (p.name == "" || p.running < s.lim.ProjectMaxConcurrent)
}

// enqueue queues a run of user in p, putting p and the user in turn if they were not. s.mu is
// held.
func (s *Slots) enqueue(p *projectQueue, user string) *waiter {
	if len(p.ring) == 0 {
		s.ring = append(s.ring, p)
	}
	u := p.users[user]
	if u == nil {
		u = &userQueue{name: user}
		p.users[user] = u
		p.ring = append(p.ring, u)
	}
	w := &waiter{p: p, u: u, ready: make(chan struct{})}
	u.waiters = append(u.waiters, w)
	return w
}

// dequeue removes a waiter that gave up. s.mu is held.
func (s *Slots) dequeue(w *waiter) {
	u, p := w.u, w.p
	u.waiters = slices.DeleteFunc(u.waiters, func(x *waiter) bool { return x == w })
	if len(u.waiters) > 0 {
		return
	}
	delete(p.users, u.name)
	p.ring, p.next = removeTurn(p.ring, p.next, slices.Index(p.ring, u))
	if len(p.ring) == 0 {
		s.ring, s.next = removeTurn(s.ring, s.next, slices.Index(s.ring, p))
	}
}

// dispatch grants free slots to queued runs, project by project and user by user in turn,
// skipping projects at their bound. Afterwards no queued run could start. s.mu is held.
func (s *Slots) dispatch() {
	for s.running < s.lim.MaxConcurrent && len(s.ring) > 0 {
		i := -1
		for k := range s.ring {
			j := (s.next + k) % len(s.ring)
			if s.fits(s.ring[j]) {
				i = j
				break
			}
		}
		if i < 0 {
			return
		}
		p := s.ring[i]
		ui := p.next % len(p.ring)
		u := p.ring[ui]
		w := u.waiters[0]
		u.waiters = u.waiters[1:]
		p.next = ui + 1
		if len(u.waiters) == 0 {
			delete(p.users, u.name)
			p.ring, p.next = removeTurn(p.ring, p.next, ui)
		}
		s.next = i + 1
		if len(p.ring) == 0 {
			s.ring, s.next = removeTurn(s.ring, s.next, i)
		}
		w.granted = true
		s.running++
		p.running++
		close(w.ready)
	}
}

// dropProject forgets p when it has nothing running or queued. s.mu is held.
func (s *Slots) dropProject(p *projectQueue) {
	if p.running == 0 && len(p.ring) == 0 && s.projects[p.name] == p {
		delete(s.projects, p.name)
	}
}

// removeTurn removes ring[i] and returns the ring and the index of the turn that was next, so
// that removing an entry before it does not skip anyone.
func removeTurn[T any](ring []T, next, i int) ([]T, int) {
	ring = slices.Delete(ring, i, i+1)
	if i < next {
		next--
	}
	if len(ring) > 0 {
		next %= len(ring)
	} else {
		next = 0
	}
	return ring, next
}

// botSlots is one bot's bound: a semaphore.
type botSlots struct {
	ch   chan struct{}
	refs int // runs holding or waiting for a slot; the entry goes when it drops to 0
}

// take waits for a slot of the bot.
func (b *botSlots) take(ctx context.Context, expired func() <-chan time.Time) error {
	select {
	case b.ch <- struct{}{}:
		return nil
	default:
	}
	select {
	case b.ch <- struct{}{}:
		return nil
	case <-expired():
		return ErrBusy
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Slots) botSlots(botID string, n int) *botSlots {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.perBot[botID]
	if b == nil {
		b = &botSlots{ch: make(chan struct{}, n)}
		s.perBot[botID] = b
	}
	b.refs++
	return b
}

func (s *Slots) dropBot(botID string, b *botSlots) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.refs--; b.refs == 0 && s.perBot[botID] == b {
		delete(s.perBot, botID)
	}
}

package botrunner

import (
	"context"
	"sync"
	"time"
)

// limiter hands out run slots: a global semaphore plus one per bot that asks for a bound.
// Waiting is bounded, so a flood of runs turns into ErrBusy instead of a growing queue.
type limiter struct {
	global chan struct{}

	mu     sync.Mutex
	perBot map[string]*botSlots
}

type botSlots struct {
	ch   chan struct{}
	refs int // runs holding or waiting for a slot; the entry goes when it drops to 0
}

func newLimiter(n int) *limiter {
	return &limiter{global: make(chan struct{}, n), perBot: map[string]*botSlots{}}
}

// acquire takes the bot's slot (when botMax > 0) and then a global one, so runs queued behind a
// busy bot hold no global slot. It returns the function that gives both back.
func (l *limiter) acquire(ctx context.Context, botID string, botMax int, wait time.Duration) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var timeout <-chan time.Time
	var timer *time.Timer
	// take waits for a slot on ch; the timer is started only when a slot is not free at once.
	take := func(ch chan struct{}) error {
		select {
		case ch <- struct{}{}:
			return nil
		default:
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			timeout = timer.C
		}
		select {
		case ch <- struct{}{}:
			return nil
		case <-timeout:
			return ErrBusy
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()

	var bot *botSlots
	if botMax > 0 {
		bot = l.botSlots(botID, botMax)
		if err := take(bot.ch); err != nil {
			l.dropBot(botID, bot)
			return nil, err
		}
	}
	if err := take(l.global); err != nil {
		if bot != nil {
			<-bot.ch
			l.dropBot(botID, bot)
		}
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-l.global
			if bot != nil {
				<-bot.ch
				l.dropBot(botID, bot)
			}
		})
	}, nil
}

func (l *limiter) botSlots(botID string, n int) *botSlots {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.perBot[botID]
	if b == nil {
		b = &botSlots{ch: make(chan struct{}, n)}
		l.perBot[botID] = b
	}
	b.refs++
	return b
}

func (l *limiter) dropBot(botID string, b *botSlots) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b.refs--; b.refs == 0 && l.perBot[botID] == b {
		delete(l.perBot, botID)
	}
}

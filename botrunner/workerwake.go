package botrunner

import (
	"sync"
	"time"
)

// A worker runs on one P, and a bot looping in JavaScript gives it up only when the runtime's
// system monitor preempts it: until then neither the run's timeout timer nor a cancel frame can
// interrupt it. The monitor sleeps while every P is idle, and wakes by itself only at the
// earliest timer it knew of when it fell asleep (or when a goroutine enters an ordinary system
// call, which a worker's frames no longer do: rawPipe). Waking it for every run costs as much as
// the frames' system calls did (it then polls every 20 µs until the worker is idle again), so
// instead, while runs keep coming, a timer ticks every monitorTick: a sleeping monitor never
// sleeps past the next tick, and a looping bot is preempted, and its timeout seen, at most about
// monitorTick + 10 ms late. Only the first run after monitorIdle without runs wakes the monitor
// itself, with a system call.
const (
	monitorTick = 10 * time.Millisecond
	monitorIdle = time.Second
)

// monitorKeeper keeps the system monitor within monitorTick of waking while runs come.
type monitorKeeper struct {
	mu      sync.Mutex
	timer   *time.Timer
	ticking bool
	lastRun time.Time
}

// runStarting is called by each run before it sets its timeout timer.
func (k *monitorKeeper) runStarting() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lastRun = time.Now()
	if k.ticking {
		return
	}
	k.ticking = true
	wakeSystemMonitor()
	if k.timer == nil {
		k.timer = time.AfterFunc(monitorTick, k.tick)
	} else {
		k.timer.Reset(monitorTick)
	}
}

func (k *monitorKeeper) tick() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if time.Since(k.lastRun) > monitorIdle {
		k.ticking = false
		return
	}
	k.timer.Reset(monitorTick)
}

package caddymodule

import (
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// exitPollInterval is how often the exit watcher asks Caddy whether the process is exiting.
const exitPollInterval = 100 * time.Millisecond

// Caddy says the process is exiting (caddy.Exiting) at the start of its exit, but calls
// nothing of a module's until after the HTTP servers have stopped, and by default they wait
// for every request to finish: a 15-minute bot run would hold the exit for 15 minutes. So one
// watcher per process notices the exit and tells every loaded config's bot API, including the
// APIs of configs a reload has replaced whose async runs still go on. It is process state for
// a process-wide fact, started on first use and never stopped (the process is ending when it
// fires).
var exitWatch struct {
	once    sync.Once
	exiting chan struct{}
}

// processExiting returns a channel closed once Caddy has begun to exit.
func processExiting() <-chan struct{} {
	exitWatch.once.Do(func() {
		exitWatch.exiting = make(chan struct{})
		go func() {
			tick := time.NewTicker(exitPollInterval)
			defer tick.Stop()
			for range tick.C {
				if caddy.Exiting() {
					close(exitWatch.exiting)
					return
				}
			}
		}()
	})
	return exitWatch.exiting
}

package main

import (
	"errors"
	"time"
)

// cpuWindow measures a process tree's CPU time between two instants: the start
// of the measured window and its end, or the moment finish is called if
// that is earlier (count-limited runs stop before their time cap). Each
// reading is published by closing a channel, so no lock is needed.
type cpuWindow struct {
	pid        int
	start, end cpuTimes
	startErr   error
	endErr     error
	started    chan struct{}
	endTimer   *time.Timer   // nil without a time limit
	ended      chan struct{} // closed by endTimer
}

func newCPUWindow(pid int, startAt, endAt time.Time) *cpuWindow {
	w := &cpuWindow{pid: pid, started: make(chan struct{})}
	if pid == 0 {
		close(w.started)
		return w
	}
	time.AfterFunc(time.Until(startAt), func() {
		w.start, w.startErr = treeCPU(pid)
		close(w.started)
	})
	if !endAt.IsZero() {
		w.ended = make(chan struct{})
		w.endTimer = time.AfterFunc(time.Until(endAt), func() {
			<-w.started
			w.end, w.endErr = treeCPU(pid)
			close(w.ended)
		})
	}
	return w
}

// finish returns the CPU seconds of the window, of the whole tree and of its
// root alone. It is called once the workers stopped: at the time limit (then
// the end reading is made or about to be) or earlier, when the request count
// was reached.
func (w *cpuWindow) finish() (tree, own float64, err error) {
	if w.pid == 0 {
		return 0, 0, nil
	}
	<-w.started
	if w.endTimer != nil && !w.endTimer.Stop() {
		<-w.ended
	} else {
		w.end, w.endErr = treeCPU(w.pid)
	}
	if err := errors.Join(w.startErr, w.endErr); err != nil {
		return 0, 0, err
	}
	return (w.end.tree - w.start.tree).Seconds(), (w.end.own - w.start.own).Seconds(), nil
}

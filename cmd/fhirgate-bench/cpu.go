package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; it is 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// processCPU returns the user+system CPU time of pid.
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading process CPU time: %w", err)
	}
	return parseStatCPU(string(data))
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted after its closing parenthesis.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("parsing process stat: no command name")
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, errors.New("parsing process stat: too few fields")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing process stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// cpuWindow measures a process's CPU time between two instants: the start
// of the measured window and its end, or the moment finish is called if
// that is earlier (count-limited runs stop before their time cap). Each
// reading is published by closing a channel, so no lock is needed.
type cpuWindow struct {
	pid        int
	start, end time.Duration
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
		w.start, w.startErr = processCPU(pid)
		close(w.started)
	})
	if !endAt.IsZero() {
		w.ended = make(chan struct{})
		w.endTimer = time.AfterFunc(time.Until(endAt), func() {
			<-w.started
			w.end, w.endErr = processCPU(pid)
			close(w.ended)
		})
	}
	return w
}

// finish returns the CPU seconds of the window. It is called once the
// workers stopped: at the time limit (then the end reading is made or about
// to be) or earlier, when the request count was reached.
func (w *cpuWindow) finish() (float64, error) {
	if w.pid == 0 {
		return 0, nil
	}
	<-w.started
	if w.endTimer != nil && !w.endTimer.Stop() {
		<-w.ended
	} else {
		w.end, w.endErr = processCPU(w.pid)
	}
	if err := errors.Join(w.startErr, w.endErr); err != nil {
		return 0, err
	}
	return (w.end - w.start).Seconds(), nil
}

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Caddy runs bots in worker processes of its own (bot_isolation process,
// the default), so the gateway's CPU time and memory are those of its
// process tree, not of the caddy process alone.

// procStat is what the harness reads from /proc/<pid>/stat.
type procStat struct {
	pid, ppid int
	// cpu is utime+stime+cutime+cstime: the process's own CPU time plus
	// that of its children it has reaped, so a worker that exits during a
	// measurement still counts.
	cpu time.Duration
	// start is the start time in clock ticks after boot; with the pid it
	// names one process even after the pid is reused.
	start uint64
}

// parseStat parses a /proc/<pid>/stat line. The command name (field 2) may
// hold spaces and parentheses, so fields are counted after its last ')'.
func parseStat(stat string) (procStat, error) {
	open := strings.IndexByte(stat, '(')
	i := strings.LastIndexByte(stat, ')')
	if open < 0 || i < open {
		return procStat{}, errors.New("parsing process stat: no command name")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(stat[:open]))
	if err != nil {
		return procStat{}, fmt.Errorf("parsing process stat pid: %w", err)
	}
	// f[0] is field 3 (state); field n is f[n-3].
	f := strings.Fields(stat[i+1:])
	if len(f) < 20 {
		return procStat{}, errors.New("parsing process stat: too few fields")
	}
	num := func(field int) (uint64, error) {
		v, err := strconv.ParseUint(f[field-3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing process stat field %d: %w", field, err)
		}
		return v, nil
	}
	ppid, err := num(4)
	if err != nil {
		return procStat{}, err
	}
	var ticks uint64
	for _, field := range []int{14, 15, 16, 17} { // utime stime cutime cstime
		v, err := num(field)
		if err != nil {
			return procStat{}, err
		}
		ticks += v
	}
	start, err := num(22)
	if err != nil {
		return procStat{}, err
	}
	return procStat{pid: pid, ppid: int(ppid), cpu: time.Duration(ticks) * time.Second / clockTicks, start: start}, nil
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; it is 100 on
// every Linux architecture Go supports.
const clockTicks = 100

func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, fmt.Errorf("reading process stat: %w", err)
	}
	return parseStat(string(data))
}

// processTree returns root and all its live descendants, root first.
func processTree(root int) ([]procStat, error) {
	self, err := readStat(root)
	if err != nil {
		return nil, err
	}
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	children := map[int][]procStat{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == root {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue // exited meanwhile
		}
		children[st.ppid] = append(children[st.ppid], st)
	}
	tree := []procStat{self}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i].pid]...)
	}
	return tree, nil
}

// treeCPU is the CPU time of root's process tree (see procStat.cpu) and of
// root alone: the gateway without its bot workers.
func treeCPU(root int) (cpuTimes, error) {
	tree, err := processTree(root)
	if err != nil {
		return cpuTimes{}, err
	}
	t := cpuTimes{own: tree[0].cpu}
	for _, p := range tree {
		t.tree += p.cpu
	}
	return t, nil
}

// cpuTimes is a reading of a process tree's CPU time.
type cpuTimes struct{ tree, own time.Duration }

// killLeftovers kills processes of an earlier tree snapshot that are still
// running, after their parent was stopped. The start time check makes sure
// a reused pid is never hit.
func killLeftovers(snapshot []procStat) {
	for _, p := range snapshot {
		now, err := readStat(p.pid)
		if err != nil || now.start != p.start {
			continue
		}
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

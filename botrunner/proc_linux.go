package botrunner

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// workerSysProcAttr puts a worker in its own process group, so a Ctrl-C in the gateway's
// terminal does not kill it under a run, and has the kernel SIGKILL it when the gateway dies.
func workerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// forkThread starts workers from one OS thread that never exits. Pdeathsig fires when the
// thread that forked the child ends, not the process (golang/go#27505), and Go ends threads
// whose goroutine exits while locked to them; a thread locked here forever is safe.
var forkThread struct {
	once sync.Once
	jobs chan func()
}

// startWorkerProcess starts cmd on the fork thread.
func startWorkerProcess(cmd *exec.Cmd) error {
	forkThread.once.Do(func() {
		forkThread.jobs = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for job := range forkThread.jobs {
				job()
			}
		}()
	})
	errc := make(chan error, 1)
	forkThread.jobs <- func() {
		closeInheritedOnExec()
		errc <- cmd.Start()
	}
	return <-errc
}

// closeInheritedOnExec sets close-on-exec on every descriptor of this process above stderr, so
// a worker gets only the stdin, stdout and stderr that os/exec gives it. Go opens all of its own
// files close-on-exec, but descriptors the gateway inherited (from a shell, a supervisor, a
// socket-activating init) arrive without the flag, and os/exec passes those on to every child.
//
// Setting the flag changes nothing for the gateway itself: the descriptors stay open and work
// as before; the flag only says a program this process execs does not get them. Caddy execs no
// program that expects to inherit descriptors by number, and a command started with
// exec.Cmd.ExtraFiles still gets its files, since the child's copies are made by dup2, which
// clears the flag. It runs before every start, not once, so a descriptor opened later without
// the flag (cgo, a raw system call) is covered too.
func closeInheritedOnExec() {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return // no /proc: nothing to list the descriptors by; the worker inherits as before
	}
	names, _ := d.Readdirnames(-1)
	_ = d.Close()
	for _, name := range names {
		if fd, err := strconv.Atoi(name); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// residentBytes is the memory a process holds of its own: the anonymous and shared-memory parts
// of its resident set (RssAnon + RssShmem in /proc/<pid>/status). The file-backed part, the
// binary's pages (some 50 MiB of a Caddy build), is page cache shared with the gateway and
// every other worker, and is not what a bot can grow.
func residentBytes(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	return parseResident(b)
}

// statusReader reads the resident memory of processes it is asked about again and again (the
// pool's busy workers, every rssCheckInterval), keeping each one's /proc status file open and
// reading it from its start: opening it is most of the cost (os.ReadFile 250-590 µs, a read of
// the open file 73-78 µs, on a busy 2-CPU VM), and with two busy workers the pool reads a
// hundred times a second. An open status file keeps naming the process it was opened for;
// once that process is gone, reads fail and the file is closed.
type statusReader struct {
	files map[int]*os.File
	read  map[int]bool // read since the last sweep
	buf   []byte
}

func newStatusReader() *statusReader {
	return &statusReader{files: map[int]*os.File{}, read: map[int]bool{}, buf: make([]byte, 8<<10)}
}

// residentBytes is residentBytes(pid) through the open file.
func (r *statusReader) residentBytes(pid int) (int64, error) {
	f := r.files[pid]
	if f == nil {
		var err error
		if f, err = os.Open("/proc/" + strconv.Itoa(pid) + "/status"); err != nil {
			return 0, err
		}
		r.files[pid] = f
	}
	r.read[pid] = true
	n, err := f.ReadAt(r.buf, 0)
	if n == 0 || (err != nil && !errors.Is(err, io.EOF)) {
		f.Close()
		delete(r.files, pid)
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	return parseResident(r.buf[:n])
}

// sweep closes the files of the processes not read since the previous sweep.
func (r *statusReader) sweep() {
	for pid, f := range r.files {
		if !r.read[pid] {
			f.Close()
			delete(r.files, pid)
		}
	}
	clear(r.read)
}

// close closes every file.
func (r *statusReader) close() {
	clear(r.read)
	r.sweep()
}

// parseResident sums RssAnon and RssShmem of a /proc status file.
func parseResident(b []byte) (int64, error) {
	var total int64
	for _, field := range []string{"\nRssAnon:", "\nRssShmem:"} {
		_, rest, ok := bytes.Cut(b, []byte(field))
		if !ok {
			return 0, errors.New("no " + strings.TrimPrefix(field, "\n") + " in /proc status")
		}
		line, _, _ := bytes.Cut(rest, []byte("\n"))
		kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(line), []byte("kB")))), 10, 64)
		if err != nil {
			return 0, err
		}
		total += kb << 10
	}
	return total, nil
}

// workerPipes returns the protocol's ends: duplicates of stdin and stdout in non-blocking mode,
// so reads and writes park goroutines in the runtime's poller instead of holding the worker's
// one thread in a system call. fd 1 then becomes a copy of stderr, so anything else printed to
// stdout goes to the pool's log instead of corrupting the frames.
func workerPipes() (io.Reader, io.Writer, error) {
	var files [2]*os.File
	for i, name := range []string{"bot-worker-in", "bot-worker-out"} {
		fd, err := syscall.Dup(i)
		if err != nil {
			return nil, nil, err
		}
		syscall.CloseOnExec(fd)
		if err := syscall.SetNonblock(fd, true); err != nil {
			return nil, nil, err
		}
		files[i] = os.NewFile(uintptr(fd), name)
	}
	if err := syscall.Dup3(2, 1, 0); err != nil {
		return nil, nil, err
	}
	return pipeReader(files[0]), pipeWriter(files[1]), nil
}

func ignoreStopSignals() {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
}

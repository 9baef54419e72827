package botrunner

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// rawPipe reads or writes one end of a non-blocking pipe with raw system calls, waiting for it
// through the runtime's poller when it is not ready.
//
// A pipe read or write that does not block takes a microsecond, but os.File makes it an
// ordinary system call: the runtime marks the goroutine as in a system call, and when every
// P of the process was idle (a worker between runs, the gateway between bursts) it first wakes
// its system monitor, which then polls every 20 µs for a millisecond. Measured on the harness's
// $execute echo, the monitor's wake-ups and sleeps were some 13% of a worker's CPU and 10% of
// the gateway's. A raw call on a non-blocking descriptor cannot block, so the runtime need not
// know about it.
type rawPipe struct {
	f  *os.File
	rc syscall.RawConn

	// One read and one write at a time (the holder of the worker's reading lock, or the worker's
	// frame reader; the frame writer's lock):
	// the calls' state lives here, so that the functions handed to rc are made once.
	rb          []byte
	rn          int
	rerrno      syscall.Errno
	wb          []byte
	wn          int
	werrno      syscall.Errno
	read, write func(fd uintptr) bool
}

// pipeReader and pipeWriter wrap a pipe end made by os.Pipe or os.NewFile on a non-blocking
// descriptor; any other file, or one that gives no raw access, is used as it is.
func pipeReader(f *os.File) io.Reader { return wrapPipe(f) }
func pipeWriter(f *os.File) io.Writer { return wrapPipe(f) }

func wrapPipe(f *os.File) io.ReadWriter {
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	p := &rawPipe{f: f, rc: rc}
	p.read, p.write = p.readOnce, p.writeSome
	return p
}

func (p *rawPipe) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	p.rb, p.rn, p.rerrno = b, 0, 0
	err := p.rc.Read(p.read)
	n, errno := p.rn, p.rerrno
	p.rb = nil
	switch {
	case err != nil:
		return 0, p.closed("read")
	case errno != 0:
		return 0, &os.PathError{Op: "read", Path: p.f.Name(), Err: errno}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// readOnce reads once into p.rb; false means the pipe is empty: wait in the poller.
func (p *rawPipe) readOnce(fd uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p.rb[0])), uintptr(len(p.rb)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		p.rn, p.rerrno = int(r), e
		return true
	}
}

// Write writes all of b (a pipe takes at most its buffer per call), waiting in the poller while
// the pipe is full. A reader that went away is EPIPE: the runtime ignores the SIGPIPE of a
// descriptor other than stdout and stderr.
func (p *rawPipe) Write(b []byte) (int, error) {
	p.wb, p.wn, p.werrno = b, 0, 0
	err := p.rc.Write(p.write)
	n, errno := p.wn, p.werrno
	p.wb = nil
	switch {
	case err != nil:
		return n, p.closed("write")
	case errno != 0:
		return n, &os.PathError{Op: "write", Path: p.f.Name(), Err: errno}
	}
	return n, nil
}

// writeSome writes what is left of p.wb; false means the pipe is full: wait in the poller.
func (p *rawPipe) writeSome(fd uintptr) bool {
	for p.wn < len(p.wb) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p.wb[p.wn])), uintptr(len(p.wb)-p.wn))
		switch e {
		case 0:
			p.wn += int(r)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			p.werrno = e
			return true
		}
	}
	return true
}

// closed is the error of a read or write on a closed file, as os.File gives it: RawConn's own
// error is the poller's, which does not match os.ErrClosed.
func (p *rawPipe) closed(op string) error {
	return &os.PathError{Op: op, Path: p.f.Name(), Err: os.ErrClosed}
}

// wakeSystemMonitor makes one ordinary system call, which wakes the runtime's system monitor
// if it sleeps because every P was idle (see monitorKeeper).
func wakeSystemMonitor() { _, _, _ = syscall.Syscall(syscall.SYS_GETPID, 0, 0, 0) }

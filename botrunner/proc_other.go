//go:build !linux

package botrunner

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// Outside Linux a worker has no parent-death signal (it still exits when its stdin closes)
// and the pool cannot read its resident memory, so only the worker's own limits apply. Nor are
// the gateway's inherited descriptors listed and marked close-on-exec before a worker starts
// (there is no /proc/self/fd): a worker gets any descriptor the gateway inherited without the
// flag.

func workerSysProcAttr() *syscall.SysProcAttr { return nil }

func startWorkerProcess(cmd *exec.Cmd) error { return cmd.Start() }

var errNoRSS = errors.New("reading a process's resident memory is supported on Linux only")

func residentBytes(int) (int64, error) { return 0, errNoRSS }

// statusReader has nothing to read outside Linux.
type statusReader struct{}

func newStatusReader() *statusReader                   { return &statusReader{} }
func (*statusReader) residentBytes(int) (int64, error) { return 0, errNoRSS }
func (*statusReader) sweep()                           {}
func (*statusReader) close()                           {}

// workerPipes uses stdin and stdout as they are; stray writes to stdout would corrupt frames.
func workerPipes() (io.Reader, io.Writer, error) { return os.Stdin, os.Stdout, nil }

func ignoreStopSignals() { signal.Ignore(os.Interrupt, syscall.SIGTERM) }

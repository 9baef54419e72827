//go:build !linux

package botrunner

import (
	"io"
	"os"
)

// pipeReader and pipeWriter are the pipe itself off Linux (see pipeio_linux.go).
func pipeReader(f *os.File) io.Reader { return f }
func pipeWriter(f *os.File) io.Writer { return f }

// wakeSystemMonitor is not needed where the pipes are used through os.File, whose every read
// and write is an ordinary system call.
func wakeSystemMonitor() {}

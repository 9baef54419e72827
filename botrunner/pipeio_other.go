//go:build !linux

package botrunner

import (
	"io"
	"os"
)

// pipeReader and pipeWriter are the pipe itself off Linux (see pipeio_linux.go).
func pipeReader(f *os.File) io.Reader { return f }
func pipeWriter(f *os.File) io.Writer { return f }

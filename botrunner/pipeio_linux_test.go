package botrunner

import (
	"bytes"
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
)

// TestRawPipe sends a frame much larger than a pipe's buffer through rawPipe ends (the writer
// waits in the poller while the pipe is full), then checks end of file, a closed file and a
// reader that went away read as os.File's do.
func TestRawPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	in, out := pipeReader(r), pipeWriter(w)
	if _, ok := in.(*rawPipe); !ok {
		t.Fatalf("pipeReader gave %T, want *rawPipe", in)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	written := make(chan error, 1)
	go func() {
		n, err := out.Write(want)
		if err == nil && n != len(want) {
			err = io.ErrShortWrite
		}
		w.Close()
		written <- err
	}()
	got, err := io.ReadAll(in) // ends at io.EOF once the writer closed
	if err != nil {
		t.Fatal(err)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(want))
	}
	r.Close()
	if _, err := in.Read(make([]byte, 8)); !errors.Is(err, os.ErrClosed) {
		t.Errorf("read from a closed file: %v, want os.ErrClosed", err)
	}

	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	r2.Close()
	if _, err := pipeWriter(w2).Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("write with no reader: %v, want EPIPE", err)
	}
}

package botrunner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// TestWorkersGetNoInheritedDescriptors: a descriptor the gateway holds without close-on-exec
// (as one it inherited from its own parent would be) does not reach a worker. os/exec passes
// such descriptors to every child; the pool marks them close-on-exec before starting one.
func TestWorkersGetNoInheritedDescriptors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inherited")
	if err := os.WriteFile(path, []byte("gateway only"), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY, 0) // no O_CLOEXEC, unlike os.Open
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)

	p := newTestPool(t, PoolOptions{})
	prog := mustCompile(t, "index.js", `exports.handler = () => 'ok'`)
	if res, err := p.Run(ctxT(t), Request{Code: prog.JS, Event: jsonEvent(t, `{}`)}); err != nil || res.Outcome != OutcomeSuccess {
		t.Fatalf("%+v, %v", res, err)
	}
	p.mu.Lock()
	w := p.idle[0]
	p.mu.Unlock()

	dir := "/proc/" + strconv.Itoa(w.pid) + "/fd"
	fds, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	std := 0
	for _, e := range fds {
		target, _ := os.Readlink(dir + "/" + e.Name())
		if target == path {
			t.Errorf("worker has the gateway's descriptor %d as its fd %s", fd, e.Name())
		}
		if n, _ := strconv.Atoi(e.Name()); n <= 2 {
			std++
		}
	}
	if std != 3 {
		t.Errorf("worker has %d of stdin, stdout and stderr", std)
	}
}

// TestStatusReaderFollowsItsProcess: the open status file gives what a fresh read gives, on
// every read (it is read again from its start, not continued), fails once the process is gone,
// and sweep closes the files of processes no longer asked about.
func TestStatusReaderFollowsItsProcess(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	r := newStatusReader()
	defer r.close()
	for i := range 3 {
		got, err := r.residentBytes(pid)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		want, err := residentBytes(pid)
		if err != nil {
			t.Fatal(err)
		}
		if got <= 0 || got > 2*want+1<<20 || want > 2*got+1<<20 {
			t.Fatalf("read %d: %d bytes through the open file, %d read afresh", i, got, want)
		}
	}
	self, err := r.residentBytes(os.Getpid())
	if err != nil || self <= 0 {
		t.Fatalf("own resident memory: %d, %v", self, err)
	}
	if len(r.files) != 2 {
		t.Fatalf("%d files open, want 2", len(r.files))
	}

	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := r.residentBytes(pid); err == nil {
		t.Fatal("a reaped process still has a resident size")
	}
	if r.files[pid] != nil {
		t.Error("the file of a reaped process stays open")
	}
	r.sweep() // own status was read since the last sweep: kept
	r.sweep() // not read since: closed
	if len(r.files) != 0 {
		t.Errorf("%d files open after two sweeps without reads", len(r.files))
	}
}

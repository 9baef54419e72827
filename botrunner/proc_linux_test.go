package botrunner

import (
	"os"
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

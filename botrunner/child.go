package botrunner

import (
	"fmt"
	"os"
	"os/exec"
)

// child is a started worker or compile process and the gateway's ends of its pipes.
type child struct {
	cmd    *exec.Cmd
	stdin  *os.File // the gateway writes frames here
	stdout *os.File // and reads the child's frames here
	stderr *os.File // the child's diagnostics
}

// startChild starts command as a bot worker (role) with a memory limit: the minimal
// environment, its own process group and the parent-death signal (workerSysProcAttr), and
// nothing of the gateway's file descriptors but the three pipes (startWorkerProcess).
func startChild(command []string, memory int64, role string) (*child, error) {
	var files []*os.File // every end, closed on failure
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("creating a pipe: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("creating a pipe: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("creating a pipe: %w", err)
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = workerEnvironment(memory, role)
	cmd.Dir = os.TempDir()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = workerSysProcAttr()
	err = startWorkerProcess(cmd)
	inR.Close() // the child's ends
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("starting %s: %w", command[0], err)
	}
	return &child{cmd: cmd, stdin: inW, stdout: outR, stderr: errR}, nil
}

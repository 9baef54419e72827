package main

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// medplumPeerJS is the Medplum-style peer: Node running a bot with a fresh
// vm.runInNewContext per request, as Medplum's vmcontext runtime does.
//
//go:embed medplumpeer.cjs
var medplumPeerJS []byte

// echoBotCJS is the echo bot as Medplum deploys it, compiled to CommonJS.
const echoBotCJS = "exports.handler = async function handler(medplum, event) {\n  return event.input;\n};\n"

// nodePeer is a running Medplum-style peer.
type nodePeer struct {
	cmd  *exec.Cmd
	addr string // host:port
}

// startMedplumPeer installs @medplum/core (once, as scenario 4 does) and
// starts the peer on a loopback port. The string is why the peer is
// unavailable (no Node, no npm, install failed), "" when it runs.
func (h *harness) startMedplumPeer(ctx context.Context) (*nodePeer, string) {
	if _, err := exec.LookPath("node"); err != nil {
		return nil, "node is not installed"
	}
	dir, err := medplumDir()
	if err != nil {
		return nil, err.Error()
	}
	if err := installMedplum(ctx, dir); err != nil {
		return nil, err.Error()
	}
	script := filepath.Join(dir, "medplumpeer.cjs")
	if err := os.WriteFile(script, medplumPeerJS, 0o600); err != nil {
		return nil, fmt.Sprintf("writing the node script: %v", err)
	}
	code := filepath.Join(h.tmp, "echo.cjs")
	if err := os.WriteFile(code, []byte(echoBotCJS), 0o600); err != nil {
		return nil, fmt.Sprintf("writing the bot: %v", err)
	}
	cmd := exec.CommandContext(ctx, "node", script, code)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Sprintf("starting node: %v", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Sprintf("starting node: %v", err)
	}
	p := &nodePeer{cmd: cmd}
	ready := make(chan string, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadBytes('\n')
		var hello struct {
			Port int `json:"port"`
		}
		if err != nil || json.Unmarshal(line, &hello) != nil || hello.Port == 0 {
			ready <- ""
			return
		}
		ready <- "127.0.0.1:" + strconv.Itoa(hello.Port)
	}()
	select {
	case p.addr = <-ready:
	case <-time.After(30 * time.Second):
	}
	if p.addr == "" {
		p.stop()
		return nil, "the node peer did not start listening"
	}
	h.logf("medplum-style peer: node pid %d on %s", cmd.Process.Pid, p.addr)
	return p, ""
}

func (p *nodePeer) pid() int { return p.cmd.Process.Pid }

// stop ends the peer and waits for it.
func (p *nodePeer) stop() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// caddyProc is a running Caddy.
type caddyProc struct {
	cmd     *exec.Cmd
	sites   sites
	logPath string
	// storeDir is the instance's storage directory, to tell the store's
	// memory-mapped files apart in its memory readings.
	storeDir string
	done     chan struct{}
}

// startCaddy writes the Caddyfile into dir and runs `caddy run` there, with
// HOME and the XDG directories inside dir, and waits until the admin API
// and the plain proxy answer.
func startCaddy(ctx context.Context, bin, dir string, cfg caddyConfig) (*caddyProc, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating caddy directory: %w", err)
	}
	conf := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(conf, []byte(cfg.caddyfile()), 0o600); err != nil {
		return nil, fmt.Errorf("writing Caddyfile: %w", err)
	}
	logPath := filepath.Join(dir, "caddy.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating caddy log: %w", err)
	}
	cmd := exec.Command(bin, "run", "--config", conf, "--adapter", "caddyfile")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Killed with us even if we are killed without a chance to clean up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting caddy: %w", err)
	}
	p := &caddyProc{cmd: cmd, sites: cfg.sites, logPath: logPath, storeDir: cfg.storageDir, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	if err := p.waitReady(ctx); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

func (p *caddyProc) pid() int { return p.cmd.Process.Pid }

// waitReady polls until Caddy serves both its admin API and the plain site.
func (p *caddyProc) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(90 * time.Second)
	client := &http.Client{Timeout: 2 * time.Second}
	urls := []string{"http://" + p.sites.admin + "/config/", "http://" + p.sites.plain + "/fhir/R4/Patient/1"}
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("caddy exited during startup:\n%s", p.logTail())
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		ready := true
		for _, u := range urls {
			resp, err := client.Get(u)
			if err != nil {
				ready = false
				break
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				ready = false
				break
			}
		}
		if ready {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("caddy did not become ready in 90s:\n%s", p.logTail())
}

// stop asks Caddy to exit and kills it if it has not within 10 seconds,
// then kills any bot worker of it still running.
func (p *caddyProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	tree, _ := processTree(p.pid())
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	if len(tree) > 1 {
		killLeftovers(tree[1:])
	}
}

// logTail returns the end of Caddy's output for error messages.
func (p *caddyProc) logTail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const max = 4000
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return string(data)
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// repoRoot finds the module root (where go.mod is) from the working
// directory, so the harness runs from anywhere inside the checkout.
func repoRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("running go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the fhirgate module: run from the repository checkout")
	}
	root := filepath.Dir(mod)
	if _, err := os.Stat(filepath.Join(root, "cmd", "caddy")); err != nil {
		return "", fmt.Errorf("finding cmd/caddy in %s: %w", root, err)
	}
	return root, nil
}

// buildCaddy builds the real Caddy with the plugin from cmd/caddy.
func buildCaddy(ctx context.Context, root, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/caddy")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building caddy: %w\n%s", err, stderr.String())
	}
	return nil
}

// sites are the listeners of one Caddy instance.
type sites struct {
	admin   string // Caddy's admin API (pprof, fhirgate admin API)
	plain   string // reverse_proxy alone
	gateway string // fhirgate + reverse_proxy; also the token endpoint
	respond string // fhirgate + a fixed respond body
}

func newSites() (sites, error) {
	var s sites
	for _, p := range []*string{&s.admin, &s.plain, &s.gateway, &s.respond} {
		port, err := freePort()
		if err != nil {
			return sites{}, err
		}
		*p = "127.0.0.1:" + strconv.Itoa(port)
	}
	return s, nil
}

// caddyConfig is what a bench Caddyfile holds.
type caddyConfig struct {
	sites         sites
	storageDir    string
	backend       string // host:port of the FHIR stand-in
	idp           string // host:port of the identity-provider stand-in
	declaredUsers int    // users user0..user<n-1> declared in the Caddyfile
	echoBotSource string // path of the echo bot, declared when set
	respondBody   string // body of the respond site
	botIsolation  string // fhirgate's bot_isolation; "" keeps the default
}

// caddyfile renders the config. Access logs stay off (Caddy's default) so
// logging does not dominate what is measured.
func (c caddyConfig) caddyfile() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("{")
	w("\tadmin %s", c.sites.admin)
	w("\tauto_https off")
	w("\tpersist_config off")
	w("\tfhirgate {")
	w("\t\tstorage_dir %s", c.storageDir)
	w("\t\tissuer http://%s", c.sites.gateway)
	if c.botIsolation != "" {
		w("\t\tbot_isolation %s", c.botIsolation)
	}
	w("\t\tproject %s {", benchProject)
	w("\t\t\tname %s", benchProject)
	w("\t\t\tclient %s {", benchClient)
	w("\t\t\t\tuserinfo_url http://%s/userinfo", c.idp)
	w("\t\t\t}")
	for i := range c.declaredUsers {
		w("\t\t\tuser %s {", userEmail(i))
		w("\t\t\t\tprofile Practitioner/p%d", i)
		w("\t\t\t}")
	}
	if c.echoBotSource != "" {
		w("\t\t\tbot echo {")
		w("\t\t\t\tidentifier %s|echo", botSystem)
		w("\t\t\t\tsource %s", c.echoBotSource)
		w("\t\t\t}")
	}
	w("\t\t}")
	w("\t}")
	w("}")
	w("")
	w("http://%s {", c.sites.plain)
	w("\treverse_proxy %s", c.backend)
	w("}")
	w("")
	w("http://%s {", c.sites.gateway)
	w("\tfhirgate {")
	w("\t\tfhir_base /fhir/R4")
	w("\t}")
	w("\treverse_proxy %s", c.backend)
	w("}")
	w("")
	w("http://%s {", c.sites.respond)
	w("\tfhirgate {")
	w("\t\tfhir_base /fhir/R4")
	w("\t}")
	w("\theader Content-Type application/json")
	w("\trespond `%s` 200", c.respondBody)
	w("}")
	return b.String()
}

// caddyProc is a running Caddy.
type caddyProc struct {
	cmd     *exec.Cmd
	sites   sites
	logPath string
	done    chan struct{}
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
	p := &caddyProc{cmd: cmd, sites: cfg.sites, logPath: logPath, done: make(chan struct{})}
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

// memStatus is a process's resident memory in MiB: in total, anonymous
// (Go heap, goroutine stacks, off-heap allocations) and file-backed (for
// Caddy mostly Badger's memory-mapped tables and value logs, which the
// kernel can drop at will).
//
// Workers and WorkersRSS are caddy's child processes (bot workers) and the
// sum of their VmRSS, which counts the binary's shared pages once per
// worker. TreePSS is the proportional set size of caddy and its workers
// together (shared pages split between the processes sharing them): the
// gateway's real footprint.
type memStatus struct {
	RSS        float64 `json:"rss_mib"`
	Anon       float64 `json:"anon_mib"`
	File       float64 `json:"file_mib"`
	Workers    int     `json:"workers"`
	WorkersRSS float64 `json:"workers_rss_mib"`
	TreePSS    float64 `json:"tree_pss_mib"`
}

// readMem reads the memory of pid and of its descendants from /proc.
func readMem(pid int) (memStatus, error) {
	m, err := readProcMem(pid)
	if err != nil {
		return memStatus{}, err
	}
	tree, err := processTree(pid)
	if err != nil {
		return memStatus{}, err
	}
	for i, p := range tree {
		pss, err := readPSS(p.pid)
		if err != nil {
			continue // exited meanwhile
		}
		m.TreePSS += pss
		if i == 0 {
			continue
		}
		w, err := readProcMem(p.pid)
		if err != nil {
			continue
		}
		m.Workers++
		m.WorkersRSS += w.RSS
	}
	return m, nil
}

// readPSS reads a process's proportional set size in MiB.
func readPSS(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, fmt.Errorf("reading smaps_rollup: %w", err)
	}
	return parseKBLine(string(data), "Pss:")
}

// parseKBLine returns the value in MiB of the "<key> <n> kB" line.
func parseKBLine(text, key string) (float64, error) {
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == key && f[2] == "kB" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return 0, fmt.Errorf("parsing %q: %w", strings.TrimSpace(line), err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s line", key)
}

func readProcMem(pid int) (memStatus, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memStatus{}, fmt.Errorf("reading process status: %w", err)
	}
	return parseMem(string(data))
}

// describe renders the breakdown for a table row.
func (m memStatus) describe() string {
	s := fmt.Sprintf("anon %.0f, file %.0f MiB", m.Anon, m.File)
	if m.Workers > 0 {
		s += fmt.Sprintf("; %d bot workers: RSS %.0f MiB, with caddy PSS %.0f MiB", m.Workers, m.WorkersRSS, m.TreePSS)
	}
	return s
}

// parseMem extracts VmRSS, RssAnon and RssFile (in kB) from
// /proc/<pid>/status, in MiB. VmRSS is required.
func parseMem(status string) (memStatus, error) {
	var m memStatus
	fields := map[string]*float64{"VmRSS:": &m.RSS, "RssAnon:": &m.Anon, "RssFile:": &m.File}
	found := false
	for line := range strings.Lines(status) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		into, ok := fields[f[0]]
		if !ok {
			continue
		}
		if len(f) != 3 || f[2] != "kB" {
			return memStatus{}, fmt.Errorf("parsing %q", strings.TrimSpace(line))
		}
		kb, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return memStatus{}, fmt.Errorf("parsing %q: %w", strings.TrimSpace(line), err)
		}
		*into = kb / 1024
		found = found || f[0] == "VmRSS:"
	}
	if !found {
		return memStatus{}, errors.New("no VmRSS line in process status")
	}
	return m, nil
}

// deployBot deploys code to a bot through fhirgate's admin API.
func (p *caddyProc) deployBot(ctx context.Context, id, filename, code string) error {
	body, _ := json.Marshal(map[string]string{"code": code, "filename": filename})
	u := "http://" + p.sites.admin + "/fhirgate/Bot/" + id + "/$deploy"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("deploying bot %s: %w", id, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("deploying bot %s: %w", id, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("deploying bot %s: HTTP %d: %s", id, resp.StatusCode, msg)
	}
	return nil
}

// cpuProfile fetches a CPU profile of Caddy from its admin API's pprof
// endpoint, covering the next secs seconds, into path.
func (p *caddyProc) cpuProfile(ctx context.Context, secs int, path string) error {
	return p.fetchProfile(ctx, fmt.Sprintf("profile?seconds=%d", secs), path)
}

// heapProfile saves Caddy's heap profile (in use and allocated) into path.
func (p *caddyProc) heapProfile(ctx context.Context, path string) error {
	return p.fetchProfile(ctx, "heap?gc=1", path)
}

func (p *caddyProc) fetchProfile(ctx context.Context, query, path string) error {
	u := "http://" + p.sites.admin + "/debug/pprof/" + query
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("profiling caddy: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profiling caddy: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profiling caddy: HTTP %d", resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("saving profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("saving profile: %w", err)
	}
	return f.Close()
}

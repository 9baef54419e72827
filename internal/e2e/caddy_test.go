package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// caddyBin is the Caddy built from cmd/caddy for this test run.
var caddyBin string

// repoRoot is the repository checkout.
var repoRoot string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if testing.Short() || os.Getenv("FHIRGATE_SKIP_E2E") != "" {
		fmt.Println("e2e: skipped (-short)")
		return 0
	}
	wd, _ := os.Getwd()
	repoRoot = filepath.Clean(filepath.Join(wd, "..", ".."))
	dir, err := os.MkdirTemp("", "fhirgate-e2e-bin")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer os.RemoveAll(dir)
	caddyBin = filepath.Join(dir, "caddy")
	build := exec.Command("go", "build", "-o", caddyBin, "./cmd/caddy")
	build.Dir = repoRoot
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Println("e2e: building caddy:", err)
		return 1
	}
	// pgkvtest.Main drops the PostgreSQL database the tests made, if any.
	return pgkvtest.Main(m)
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// caddyProc is a running Caddy.
type caddyProc struct {
	t         *testing.T
	cmd       *exec.Cmd
	dir       string // working directory (and XDG homes)
	adminAddr string
	env       []string
	logMu     sync.Mutex
	log       bytes.Buffer
	done      chan struct{}
}

// startCaddy runs `caddy run --config config` in a fresh working
// directory, with the given extra environment, and waits for the admin API.
func startCaddy(t *testing.T, config string, adminPort int, env ...string) *caddyProc {
	t.Helper()
	dir := t.TempDir()
	p := &caddyProc{t: t, dir: dir, adminAddr: "localhost:" + strconv.Itoa(adminPort), done: make(chan struct{})}
	p.env = append(os.Environ(),
		"HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	p.env = append(p.env, env...)
	p.start(config)
	t.Cleanup(p.stop)
	return p
}

func (p *caddyProc) start(config string) {
	p.t.Helper()
	p.done = make(chan struct{})
	p.cmd = exec.Command(caddyBin, "run", "--config", config)
	p.cmd.Dir = p.dir
	p.cmd.Env = p.env
	w := &lockedWriter{p: p}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	p.waitReady()
}

type lockedWriter struct{ p *caddyProc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.logMu.Lock()
	defer w.p.logMu.Unlock()
	return w.p.log.Write(b)
}

// logs returns everything Caddy printed so far.
func (p *caddyProc) logs() string {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	return p.log.String()
}

func (p *caddyProc) waitReady() {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			p.t.Fatalf("caddy exited early:\n%s", p.logs())
		default:
		}
		resp, err := http.Get("http://" + p.adminAddr + "/config/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.t.Fatalf("caddy did not become ready:\n%s", p.logs())
}

func (p *caddyProc) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	if p.t.Failed() {
		p.t.Logf("caddy output:\n%s", p.logs())
	}
}

// kill stops Caddy abruptly (SIGKILL), as a crash would.
func (p *caddyProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// cli runs `caddy <args...>` against this instance's admin API.
func (p *caddyProc) cli(args ...string) (string, error) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, caddyBin, args...)
	cmd.Dir = p.dir
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// response is a decoded HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response is not a JSON object (status %d): %s", r.status, r.body)
	}
	return m
}

// do sends one request.
func do(t *testing.T, method, url, contentType, body string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// harness holds what every scenario shares: the settings, the built
// Caddy, the stand-ins and the report being filled in.
type harness struct {
	set        settings
	root       string // repository root
	tmp        string // everything the run writes
	caddyBin   string
	self       string // this binary, run again as the load generator
	backend    *loopbackServer
	idp        *benchIdP // the identity-provider stand-in, served at idpAddr
	idpAddr    string
	profileDir string // when set, Caddy CPU profiles are saved here
	nonce      string // makes this run's subject tokens unique
	specs      int    // load specs written so far
	log        io.Writer
}

func newNonce() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// logf reports progress on stderr, so stdout holds only the table.
func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.log, "fhirgate-bench: "+format+"\n", args...)
}

// load runs one load in a separate loadgen process. When profiling, it
// also records Caddy's CPU profile over the measured window as
// <profileDir>/<profile>.pprof.
func (h *harness) load(ctx context.Context, p *caddyProc, profile string, spec loadSpec) (*loadResult, error) {
	h.specs++
	if p != nil {
		spec.ServerPID = p.pid()
	}
	specPath := filepath.Join(h.tmp, "specs", fmt.Sprintf("%02d-%s.json", h.specs, profile))
	if err := os.MkdirAll(filepath.Dir(specPath), 0o700); err != nil {
		return nil, fmt.Errorf("writing load spec: %w", err)
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding load spec: %w", err)
	}
	if err := os.WriteFile(specPath, data, 0o600); err != nil {
		return nil, fmt.Errorf("writing load spec: %w", err)
	}

	profDone := make(chan error, 1)
	if h.profileDir != "" && p != nil && spec.Duration > 0 {
		go func() {
			select {
			case <-time.After(time.Duration(spec.Warmup)):
			case <-ctx.Done():
				profDone <- ctx.Err()
				return
			}
			secs := max(1, min(10, int(time.Duration(spec.Duration).Seconds())))
			profDone <- p.cpuProfile(ctx, secs, filepath.Join(h.profileDir, profile+".pprof"))
		}()
	} else {
		profDone <- nil
	}

	cmd := exec.CommandContext(ctx, h.self, "loadgen", "-spec", specPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if perr := <-profDone; perr != nil && ctx.Err() == nil {
		h.logf("profile %s: %v", profile, perr)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("running loadgen: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var res loadResult
	if err := parseLoadResult(out, &res); err != nil {
		return nil, err
	}
	h.logf("  %-28s %8.0f/s  p50 %.2fms  p99 %.2fms  caddy CPU/req %s  errors %d  throttled %d",
		profile, res.Throughput, res.P50Ms, res.P99Ms, res.cpuText(), res.errors(), res.Throttled)
	for _, s := range res.ErrorSamples {
		h.logf("    error sample: %s", oneLine(s, 200))
	}
	return &res, nil
}

// namedLoad is one side of a comparison.
type namedLoad struct {
	p       *caddyProc
	profile string
	spec    loadSpec
}

// compare measures two loads whose ratio is a target, in segments that
// share the measured duration (comparisonOrder), and merges each side's
// segments, so a drift of the machine during the comparison (other work
// starting or stopping) weighs on both sides alike.
func (h *harness) compare(ctx context.Context, a, b namedLoad) (*loadResult, *loadResult, error) {
	order := comparisonOrder(h.set.Rounds)
	loads := [2]namedLoad{a, b}
	var parts [2][]*loadResult
	for k, i := range order {
		l := loads[i]
		spec := l.spec
		spec.Duration = duration(time.Duration(spec.Duration) * 2 / time.Duration(len(order)))
		name := l.profile
		if len(order) > 2 {
			name = fmt.Sprintf("%s-%d", l.profile, k/2+1)
		}
		r, err := h.load(ctx, l.p, name, spec)
		if err != nil {
			return nil, nil, err
		}
		parts[i] = append(parts[i], r)
	}
	ra, err := mergeResults(parts[0]...)
	if err != nil {
		return nil, nil, err
	}
	rb, err := mergeResults(parts[1]...)
	if err != nil {
		return nil, nil, err
	}
	return ra, rb, nil
}

// comparisonOrder is the order of a comparison's segments, rounds pairs
// long, 0 for A and 1 for B: the Thue–Morse sequence (A-B, A-B-B-A,
// A-B-B-A-B-A-A-B, ...). A-B-B-A cancels a drift that is linear in time;
// each doubling also cancels the next power (a slowdown in the middle of
// the comparison, which A-B-B-A puts all on B).
func comparisonOrder(rounds int) []int {
	n := 2 * max(1, rounds)
	order := make([]int, n)
	for k := range order {
		order[k] = bits.OnesCount(uint(k)) % 2
	}
	return order
}

// parseLoadResult decodes the loadgen's output, rejecting anything that is
// not one complete result.
func parseLoadResult(out []byte, res *loadResult) error {
	dec := json.NewDecoder(strings.NewReader(string(out)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(res); err != nil {
		return fmt.Errorf("parsing loadgen output: %w", err)
	}
	if dec.More() {
		return errors.New("parsing loadgen output: trailing data after the result")
	}
	if res.Concurrency <= 0 || res.Status == nil {
		return errors.New("parsing loadgen output: not a load result")
	}
	return nil
}

// spec is a load run with the harness's durations.
func (h *harness) spec(conc int, reqs ...requestSpec) loadSpec {
	return loadSpec{Requests: reqs, Concurrency: conc, Warmup: h.set.Warmup, Duration: h.set.Measure}
}

// Requests of the scenarios.

const (
	tokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"
	accessTokenType    = "urn:ietf:params:oauth:token-type:access_token"
	formType           = "application/x-www-form-urlencoded"
)

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func patientGET(site, tok string) requestSpec {
	r := requestSpec{Method: http.MethodGet, URL: "http://" + site + "/fhir/R4/Patient/1"}
	if tok != "" {
		r.Header = bearer(tok)
	}
	return r
}

// exchangeBody is a token-exchange form; subject may hold placeholders,
// so it is not URL-encoded (bench tokens need no encoding).
func exchangeBody(subject string) string {
	return "grant_type=" + url.QueryEscape(tokenExchangeGrant) +
		"&client_id=" + benchClient +
		"&subject_token=" + subject +
		"&subject_token_type=" + url.QueryEscape(accessTokenType)
}

func exchangePOST(site, subject string) requestSpec {
	return requestSpec{
		Method: http.MethodPost, URL: "http://" + site + "/oauth2/token",
		Header: map[string]string{"Content-Type": formType}, Body: exchangeBody(subject),
	}
}

// executeURL runs a bot by identifier; value may hold placeholders.
func executeURL(site, value string) string {
	return "http://" + site + "/fhir/R4/Bot/$execute?identifier=" + url.QueryEscape(botSystem+"|") + value
}

func jsonPOST(u, tok, body string) requestSpec {
	hd := bearer(tok)
	hd["Content-Type"] = "application/json"
	return requestSpec{Method: http.MethodPost, URL: u, Header: hd, Body: body}
}

// echoInput is what the bot scenarios send: compact JSON with sorted keys,
// so an echo that re-encodes it returns the same bytes, and the respond
// baseline can answer exactly those bytes.
const echoInput = `{"active":true,"code":{"coding":[{"code":"8867-4","display":"Heart rate","system":"http://loinc.org"}]},` +
	`"id":"bench-1","note":"a trivial JSON input echoed by the bot","status":"final",` +
	`"subject":{"reference":"Patient/1"},"valueQuantity":{"code":"/min","system":"http://unitsofmeasure.org","unit":"beats/minute","value":72}}`

// unauditedEcho is the echo bot's name and identifier code when declared
// with audit_event_trigger never.
const unauditedEcho = "echo-unaudited"

// vmcontextEcho is the echo bot's name and identifier code when declared
// with runtime_version vmcontext.
const vmcontextEcho = "echo-vmcontext"

// echoBotCode is the trivial bot of scenario 3.
const echoBotCode = "export async function handler(medplum, event) {\n  return event.input;\n}\n"

// exchange performs one token exchange and returns the access token.
func exchange(ctx context.Context, site, subject string) (string, error) {
	return exchangeRequest(ctx, exchangePOST(site, subject))
}

// exchangeRequest sends a token-exchange request and returns the access
// token.
func exchangeRequest(ctx context.Context, r requestSpec) (string, error) {
	status, body, err := send(ctx, r)
	if err != nil {
		return "", fmt.Errorf("exchanging a token: %w", err)
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("exchanging a token: HTTP %d: %s", status, oneLine(body, 300))
	}
	var resp struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.AccessToken == "" {
		return "", fmt.Errorf("exchanging a token: no access_token in the answer")
	}
	return resp.AccessToken, nil
}

// send makes one request outside a load run (setup and probes).
func send(ctx context.Context, r requestSpec) (int, string, error) {
	c, err := compile(loadSpec{Requests: []requestSpec{r}})
	if err != nil {
		return 0, "", err
	}
	req, err := c[0].build(ctx, 0)
	if err != nil {
		return 0, "", err
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, "", fmt.Errorf("reading answer: %w", err)
	}
	return resp.StatusCode, string(b), nil
}

// probeExecute tells whether $execute runs the bot: "" when it answers the
// echo, else why the scenario is unavailable.
func probeExecute(ctx context.Context, r requestSpec) (string, error) {
	status, body, err := send(ctx, r)
	if err != nil {
		return "", fmt.Errorf("probing $execute: %w", err)
	}
	return executeUnavailable(status, body, r.Body), nil
}

// executeUnavailable judges a probe answer: the endpoint exists and echoes
// when it answers 200 with JSON equal to the input.
func executeUnavailable(status int, body, input string) string {
	if status != http.StatusOK {
		return fmt.Sprintf("$execute answered HTTP %d: %s", status, oneLine(body, 80))
	}
	var got, want any
	if json.Unmarshal([]byte(body), &got) != nil || json.Unmarshal([]byte(input), &want) != nil {
		return "$execute answered 200 but not JSON: " + oneLine(body, 60)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		return "$execute answered 200 but not the echo: " + oneLine(body, 60)
	}
	return ""
}

// startInstance seeds (when asked) and starts one Caddy in its own
// directory under the run's temp dir.
func (h *harness) startInstance(ctx context.Context, name string, users, bots, declared int, echoBot bool) (*caddyProc, error) {
	return h.startInstanceOn(ctx, name, users, bots, declared, echoBot, "")
}

// startInstanceOn is startInstance with the store on PostgreSQL at
// postgresDSN (seeding is for Badger stores only), or in its directory
// when postgresDSN is empty. Each tweak may change the config before it is
// written, given the instance's directory.
func (h *harness) startInstanceOn(ctx context.Context, name string, users, bots, declared int, echoBot bool, postgresDSN string, tweaks ...func(cfg *caddyConfig, dir string) error) (*caddyProc, error) {
	dir := filepath.Join(h.tmp, name)
	storeDir := filepath.Join(dir, "store")
	if users > 0 || bots > 0 {
		began := time.Now()
		if err := seedStore(ctx, storeDir, users, bots); err != nil {
			return nil, err
		}
		h.logf("%s: seeded %d users and %d bots in %s", name, users, bots, time.Since(began).Round(time.Millisecond))
	}
	s, err := newSites()
	if err != nil {
		return nil, err
	}
	cfg := caddyConfig{
		sites: s, storageDir: storeDir, postgresDSN: postgresDSN, backend: h.backend.addr, idp: h.idpAddr,
		declaredUsers: declared, respondBody: echoInput,
		botIsolation: h.set.BotIsolation, botMax: h.set.BotMaxConcurrent, botRuns: h.set.BotRunsPerWorker,
	}
	if echoBot {
		cfg.echoBotSource = filepath.Join(dir, "echo.js")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", dir, err)
		}
		if err := os.WriteFile(cfg.echoBotSource, []byte(echoBotCode), 0o600); err != nil {
			return nil, fmt.Errorf("writing echo bot: %w", err)
		}
		cfg.hl7BotSource = filepath.Join(dir, "hl7ack.js")
		if err := os.WriteFile(cfg.hl7BotSource, []byte(hl7AckBotCode), 0o600); err != nil {
			return nil, fmt.Errorf("writing HL7 bot: %w", err)
		}
	}
	for _, tweak := range tweaks {
		if err := tweak(&cfg, dir); err != nil {
			return nil, err
		}
	}
	began := time.Now()
	p, err := startCaddy(ctx, h.caddyBin, dir, cfg)
	if err != nil {
		return nil, fmt.Errorf("starting %s caddy: %w", name, err)
	}
	h.logf("%s: caddy pid %d ready in %s (gateway %s, admin %s)", name, p.pid(), time.Since(began).Round(time.Millisecond), s.gateway, s.admin)
	return p, nil
}

// tokenTail makes subject tokens unique to this run and purpose, so a
// userinfo cache entry never carries over between scenarios.
func (h *harness) tokenTail(purpose string) string { return h.nonce + "-" + purpose }

// userToken is a fixed subject token for user n.
func (h *harness) userToken(n int, purpose string) string {
	return subjectToken(n, h.tokenTail(purpose))
}

// distinctTokens is a subject-token template that differs on every request
// and spreads the requests over users 0..users-1.
func (h *harness) distinctTokens(users int, purpose string) string {
	return subjectTokenPrefix + "{seqmod:" + strconv.Itoa(users) + "}." + h.tokenTail(purpose) + "-{seq}"
}

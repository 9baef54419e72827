// Command fhirgate-bench is the load harness of issue 6: it builds the real
// Caddy from cmd/caddy, runs it as a separate process on 127.0.0.1 in front
// of in-process stand-ins for a FHIR server and an identity provider,
// drives it from a separate load-generator process (this same binary,
// `fhirgate-bench loadgen`), and prints one table plus a JSON file.
//
// Usage, from anywhere in the checkout:
//
//	go run ./cmd/fhirgate-bench [-short] [-out bench.json] [-profile DIR] [-only 1,2,...]
//	go run ./cmd/fhirgate-bench loadgen -url URL [-c 32] [-d 10s] [-H 'Name: value'] [-method POST -body ...]
//
// Scenarios (targets from issue 6, judged on ratios measured in the same
// run): 1 authenticated proxy vs plain proxy; 2 token exchange with the
// userinfo cache warm and useless; 3 bot $execute vs an authenticated
// respond of the same size, and its CPU per run vs a Medplum-style peer in
// Node (a fresh vm context per run); 4 HL7 parse+read+serialise vs @medplum/core in
// Node; 5 Caddy's RSS idle, after mixed requests and over a soak; 6
// per-request cost as stored users and bots grow; 7 to 11 MLLP, client
// credentials, JWKS, authorization and the store on PostgreSQL; 12 writes
// at a fixed rate with and without bot Subscriptions, on Badger and on
// PostgreSQL (the README lists them all).
//
// It exits 1 when any request failed or a scenario could not run, and 0
// otherwise, also when targets are missed: CI runs -short on noisy
// machines, and PASS/FAIL is for people. An endpoint that does not exist
// yet is reported as unavailable, not as failed requests.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string) int {
	if len(args) > 0 && args[0] == "loadgen" {
		if err := loadgenMain(ctx, args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "fhirgate-bench loadgen:", err)
			return 2
		}
		return 0
	}
	fs := flag.NewFlagSet("fhirgate-bench", flag.ContinueOnError)
	short := fs.Bool("short", false, "a few seconds per scenario, small stores, short soak (for CI)")
	out := fs.String("out", "bench.json", "where to write the JSON results")
	profile := fs.String("profile", "", "save a Caddy CPU profile of every load run into this directory")
	only := fs.String("only", "", "comma-separated scenario numbers to run (default all)")
	conc := fs.Int("c", 0, "override the concurrency of the throughput runs (default 32)")
	measure := fs.Duration("d", 0, "override the measured duration of each load run")
	soak := fs.Duration("soak", 0, "override the soak duration")
	keep := fs.Bool("keep", false, "keep the temporary directory (Caddyfiles, logs, stores)")
	isolation := fs.String("bot-isolation", "", "fhirgate bot_isolation for every Caddy: process or inprocess (default: fhirgate's default)")
	botMax := fs.Int("bot-max-concurrent", 0, "fhirgate bot_max_concurrent for every Caddy (default: fhirgate's default)")
	botRuns := fs.Int("bot-runs-per-worker", 0, "fhirgate bot_runs_per_worker for every Caddy (default: fhirgate's default)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	set := defaultSettings(*short)
	if *conc > 0 {
		set.Concurrency = *conc
	}
	if *measure > 0 {
		set.Measure = duration(*measure)
	}
	if *soak > 0 {
		set.Soak = duration(*soak)
	}
	want, err := parseOnly(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fhirgate-bench:", err)
		return 2
	}
	mode := "full"
	if *short {
		mode = "short"
	}
	set.BotIsolation = *isolation
	set.BotMaxConcurrent = *botMax
	set.BotRunsPerWorker = *botRuns
	rep, err := bench(ctx, set, mode, want, *profile, *keep)
	if rep != nil {
		if werr := rep.writeTable(os.Stdout); werr != nil {
			fmt.Fprintln(os.Stderr, "fhirgate-bench: writing table:", werr)
		}
		if werr := writeJSON(*out, rep); werr != nil {
			fmt.Fprintln(os.Stderr, "fhirgate-bench:", werr)
			return 1
		}
		fmt.Fprintf(os.Stderr, "fhirgate-bench: results in %s\n", *out)
	}
	return exitCode(rep, err)
}

// exitCode is 1 when the harness failed, a scenario could not run, or any
// request failed; missed targets do not count.
func exitCode(rep *report, err error) int {
	failed := false
	if err != nil {
		fmt.Fprintln(os.Stderr, "fhirgate-bench:", err)
		failed = true
	}
	if rep != nil {
		if n := rep.failedRequests(); n > 0 {
			fmt.Fprintf(os.Stderr, "fhirgate-bench: %d requests failed\n", n)
			failed = true
		}
		for _, e := range rep.scenarioErrors() {
			fmt.Fprintln(os.Stderr, "fhirgate-bench: scenario failed:", e)
			failed = true
		}
	}
	if failed {
		return 1
	}
	return 0
}

// lastScenario is the highest scenario number.
const lastScenario = 12

// parseOnly reads -only; nil means every scenario.
func parseOnly(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var ids []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > lastScenario {
			return nil, fmt.Errorf("-only %q: scenarios are numbered 1 to %d", s, lastScenario)
		}
		ids = append(ids, n)
	}
	return ids, nil
}

func writeJSON(path string, rep *report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding results: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	return nil
}

// bench runs the selected scenarios. It returns the report of whatever ran,
// also on error, and stops everything it started before returning.
func bench(ctx context.Context, set settings, mode string, want []int, profileDir string, keep bool) (*report, error) {
	started := time.Now()
	rep := &report{Machine: describeMachine(), Mode: mode, Settings: set, Started: started.UTC().Format(time.RFC3339)}
	defer func() {
		rep.Seconds = time.Since(started).Seconds()
		rep.Machine.LoadAvgEnd = loadAvg()
	}()
	selected := func(id int) bool { return want == nil || slices.Contains(want, id) }

	h := &harness{set: set, nonce: newNonce(), profileDir: profileDir, log: os.Stderr}
	var err error
	if h.root, err = repoRoot(ctx); err != nil {
		return rep, err
	}
	if h.self, err = os.Executable(); err != nil {
		return rep, fmt.Errorf("finding this binary: %w", err)
	}
	if h.tmp, err = os.MkdirTemp("", "fhirgate-bench-"); err != nil {
		return rep, fmt.Errorf("creating temp dir: %w", err)
	}
	if keep {
		h.logf("keeping %s", h.tmp)
	} else {
		defer h.removeTemp()
	}
	if profileDir != "" {
		if err := os.MkdirAll(profileDir, 0o755); err != nil {
			return rep, fmt.Errorf("creating profile dir: %w", err)
		}
	}
	add := func(s *scenario, err error) error {
		if s != nil {
			if err != nil {
				s.Error = err.Error()
			}
			rep.Scenarios = append(rep.Scenarios, s)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return nil
	}
	defer func() { slices.SortFunc(rep.Scenarios, func(a, b *scenario) int { return a.ID - b.ID }) }()

	if selected(4) {
		h.logf("scenario 4: HL7")
		if err := add(h.hl7Scenario(ctx)); err != nil {
			return rep, err
		}
	}
	needCaddy := selected(1) || selected(2) || selected(3) || selected(5) || selected(6) || selected(7) || selected(8) || selected(9) || selected(10) || selected(11) || selected(12)
	if !needCaddy {
		return rep, nil
	}
	h.caddyBin = filepath.Join(h.tmp, "caddy")
	h.logf("building caddy from %s/cmd/caddy", h.root)
	if err := buildCaddy(ctx, h.root, h.caddyBin); err != nil {
		return rep, err
	}
	if h.backend, err = startLoopback(newBackend()); err != nil {
		return rep, err
	}
	defer h.backend.Close()
	if h.idp, err = newBenchIdP(); err != nil {
		return rep, err
	}
	idp, err := startLoopback(h.idp)
	if err != nil {
		return rep, err
	}
	defer idp.Close()
	h.idpAddr = idp.addr

	if selected(1) || selected(2) || selected(3) || selected(5) || selected(7) || selected(8) || selected(9) || selected(10) || selected(11) || selected(12) {
		if err := h.runMainScenarios(ctx, selected, add); err != nil {
			return rep, err
		}
	}
	if selected(6) {
		h.logf("scenario 6: growth")
		if err := add(h.growthScenario(ctx)); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// runMainScenarios runs 1, 2, 3, 7, 8, 9, 10, 11, 12 and 5 beside one Caddy
// (11 and 12 start their own besides), memory last so it sees the state the
// other scenarios left.
func (h *harness) runMainScenarios(ctx context.Context, selected func(int) bool, add func(*scenario, error) error) error {
	m, err := h.setupMain(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, id := range []int{1, 2, 3, 7, 8, 9, 10, 11, 12, 5} {
			if selected(id) {
				_ = add(&scenario{ID: id, Title: "main instance"}, err)
			}
		}
		return nil
	}
	defer m.p.stop()
	steps := []struct {
		id  int
		run func(context.Context, *mainInstance) (*scenario, error)
	}{
		{1, h.proxyScenario}, {2, h.exchangeScenario}, {3, h.botScenario}, {7, h.mllpScenario}, {8, h.machineScenario},
		{9, h.jwksScenario}, {authzScenarioID, h.authzScenario},
		{postgresScenarioID, h.postgresScenario}, {subscriptionsScenarioID, h.subscriptionsScenario}, {5, h.memoryScenario},
	}
	for _, st := range steps {
		if !selected(st.id) {
			continue
		}
		h.logf("scenario %d", st.id)
		if err := add(st.run(ctx, m)); err != nil {
			return err
		}
		select {
		case <-m.p.done:
			return errors.New("caddy exited during the run:\n" + m.p.logTail())
		default:
		}
	}
	return nil
}

// removeTemp deletes the run's temporary directory. A process that is
// still exiting can add a file while it is being removed, so a failure is
// retried once and then reported.
func (h *harness) removeTemp() {
	err := os.RemoveAll(h.tmp)
	if err != nil {
		time.Sleep(500 * time.Millisecond)
		err = os.RemoveAll(h.tmp)
	}
	if err != nil {
		h.logf("removing %s: %v", h.tmp, err)
	}
}

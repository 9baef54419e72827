package e2e

import (
	"strings"
	"testing"
	"time"
)

// spinBot runs for its whole timeout unless stopped: a bot of a tenant who set Bot.timeout to
// its maximum (900 s).
const spinBot = `exports.handler = async (medplum, event) => {
	const until = Date.now() + (event.input.ms || 900e3);
	while (Date.now() < until) {}
	return "done";
}`

// TestReloadAndShutdownDuringLongBotRuns: bots no longer hold reloads and exits hostage.
// Before, Cleanup waited for every async run (a reload answered after 40 s with Caddy's config
// lock held, SIGTERM took 39 s, and with Bot.timeout 900, 15 minutes). Now a reload returns at
// once while async runs go on and complete; an exit stops runs still going after
// bot_shutdown_grace, answers the synchronous caller, marks the async job failed with the
// reason — and a restart does not run it again.
func TestReloadAndShutdownDuringLongBotRuns(t *testing.T) {
	const grace = 2 * time.Second
	s := startStack(t, "bot_shutdown_grace 2s")
	alice := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	spin := deployBot(t, s, alice, "spin", spinBot, 900)
	url := s.gateway + "/fhir/R4/Bot/" + spin + "/$execute"
	async := append(alice, "Prefer", "respond-async")

	// A reload while a 3 s async run and a 900 s one go on: answered at once; the short run
	// completes after it, in the pool both configs share.
	short := do(t, "POST", url, "application/json", `{"ms":3000}`, async...)
	long := do(t, "POST", url, "application/json", `{}`, async...)
	if short.status != 202 || long.status != 202 {
		t.Fatalf("async runs: %d %s / %d %s", short.status, short.body, long.status, long.body)
	}
	time.Sleep(300 * time.Millisecond) // both running
	start := time.Now()
	if out, err := s.cli("reload", "--config", s.config, "--force"); err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a reload during async bot runs took %v", took)
	} else {
		t.Logf("reload during two async runs took %v", took)
	}
	job := pollJob(t, short.header.Get("Content-Location"), alice, "completed")
	if !strings.Contains(mustJSON(t, job["output"]), "done") {
		t.Errorf("the async run across the reload: %v", job["output"])
	}
	longJob := long.header.Get("Content-Location")
	if r := do(t, "GET", longJob, "", "", alice...); r.status != 202 {
		t.Fatalf("the 900 s run after the reload: %d %s", r.status, r.body)
	}

	// An exit during the 900 s async run and a 900 s synchronous one.
	syncAnswer := make(chan response, 1)
	go func() {
		r, err := try("POST", url, "application/json", `{}`, alice...)
		if err != nil {
			r = response{status: -1, body: []byte(err.Error())}
		}
		syncAnswer <- r
	}()
	time.Sleep(500 * time.Millisecond)
	start = time.Now()
	s.stop()
	took := time.Since(start)
	t.Logf("SIGINT with two 900 s runs going: exited after %v (grace %v)", took, grace)
	if took > grace+8*time.Second {
		t.Errorf("the exit took %v; bot_shutdown_grace is %v", took, grace)
	}
	select {
	case r := <-syncAnswer:
		if r.status != 400 || !strings.Contains(string(r.body), "will not be run again") {
			t.Errorf("the synchronous run stopped by the exit was answered %d %s", r.status, r.body)
		}
	case <-time.After(5 * time.Second):
		t.Error("the synchronous caller got no answer")
	}

	s.start(s.config)
	job = pollJob(t, longJob, alice, "error")
	if out := mustJSON(t, job["output"]); !strings.Contains(out, "shut down") || !strings.Contains(out, "will not be run again") {
		t.Errorf("the async run stopped by the exit: %s", out)
	}
}

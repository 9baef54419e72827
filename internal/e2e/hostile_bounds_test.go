package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The bounds suite (issue 23, item 5): one request's tree of bot-to-bot
// calls, one async job's stored result, one project's bytes of bot records
// in the store, and the disk space bot records may take from sign-ins are
// each bounded, on the real built Caddy with bots in worker processes.

const boundsCaddyfile = `{
	admin localhost:{{.Admin}}
	skip_install_trust
	fhirgate {
		storage_dir {{.Storage}}
		issuer http://localhost:{{.Gateway}}
		bot_timeout 60s
		{{.Extra}}
		project alpha {
			client alpha-app {
				userinfo_url {{.IdP}}/userinfo
			}
			user alice@example.com {
				profile Practitioner/alice
				admin
			}
			bot fanout {
				identifier https://example.com/bots|fanout
				source {{.Testdata}}/fanout.js
			}
			bot big {
				identifier https://example.com/bots|big
				source {{.Testdata}}/big.js
			}
			bot chatty {
				identifier https://example.com/bots|chatty
				source {{.Testdata}}/chatty.js
			}
		}
	}
}

http://localhost:{{.Gateway}} {
	fhirgate {
		fhir_base /fhir/R4
	}
	reverse_proxy {{.Backend}}
}
`

// boundsBots are the suite's bots. fanout calls itself ten times per
// level (10^5 runs within the depth bound of 5), catching what each call
// rejects with; it answers how many runs its subtree made and the distinct
// rejection messages. big returns event.input.n bytes. chatty writes a
// console line that must never reach the log.
var boundsBots = map[string]string{
	"fanout.js": `exports.handler = async (medplum, event) => {
  const self = event.bot.reference.split('/')[1];
  let runs = 1;
  const messages = [];
  const note = (m) => { if (!messages.includes(m)) messages.push(m); };
  for (let i = 0; i < 10; i++) {
    try {
      const child = await medplum.executeBot(self, {}, 'application/json');
      runs += child.runs;
      child.messages.forEach(note);
    } catch (e) {
      note(e.name + ': ' + e.message);
    }
  }
  return { runs, messages };
};
`,
	"big.js":    "exports.handler = async (medplum, event) => 'x'.repeat(event.input.n);\n",
	"chatty.js": "exports.handler = async () => { console.log('CHATTY-CONSOLE-LINE'); return 'ok'; };\n",
}

// boundsStack is a gateway with the suite's bots and alice's token.
type boundsStack struct {
	*stack
	admin string
	token string
}

func startBoundsStack(t *testing.T, storage, extra string) *boundsStack {
	t.Helper()
	bots := t.TempDir()
	for name, code := range boundsBots {
		if err := os.WriteFile(filepath.Join(bots, name), []byte(code), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	idp := newIdP(t, map[string]string{"alice-token": aliceUserinfo})
	be := newBackend(t)
	if storage == "" {
		storage = filepath.Join(t.TempDir(), "store")
	}
	s := startStackFrom(t, boundsCaddyfile, faultConfig{
		stackConfig: stackConfig{IdP: idp.URL, Backend: be.URL, Testdata: bots, Extra: extra},
		Storage:     storage,
	})
	return &boundsStack{stack: s, admin: "http://" + s.adminAddr + "/fhirgate", token: s.token(t, "alpha-app", "alice-token")}
}

func (b *boundsStack) execute(t *testing.T, bot, body string, headers ...string) response {
	t.Helper()
	headers = append(headers, "Authorization", "Bearer "+b.token)
	return do(t, "POST", b.gateway+"/fhir/R4/Bot/$execute?identifier="+url.QueryEscape("https://example.com/bots|"+bot),
		"application/json", body, headers...)
}

func (b *boundsStack) botID(t *testing.T, name string) string {
	t.Helper()
	r := do(t, "GET", b.admin+"/Bot?identifier="+url.QueryEscape("https://example.com/bots|"+name), "", "")
	var bundle struct {
		Entry []struct {
			Resource struct {
				ID string `json:"id"`
			} `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(r.body, &bundle); err != nil || len(bundle.Entry) != 1 {
		t.Fatalf("finding bot %s: %d %s", name, r.status, r.body)
	}
	return bundle.Entry[0].Resource.ID
}

// auditEvents counts a bot's stored AuditEvents once the count has stopped
// changing for 600 ms: the audit writer gathers a batch for up to 250 ms
// before it writes it, in the background.
func (b *boundsStack) auditEvents(t *testing.T, botID string) int {
	t.Helper()
	last, stable := -1, 0
	for range 200 {
		r := do(t, "GET", b.admin+"/AuditEvent?bot="+botID, "", "")
		var bundle struct {
			Entry []json.RawMessage `json:"entry"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &bundle) != nil {
			t.Fatalf("listing AuditEvents: %d %.300s", r.status, r.body)
		}
		if n := len(bundle.Entry); n == last {
			if stable++; stable == 6 {
				return n
			}
		} else {
			last, stable = n, 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the AuditEvent count kept changing")
	return 0
}

// pollJob waits for an async job to end and returns it.
func (b *boundsStack) pollJob(t *testing.T, statusURL string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := do(t, "GET", statusURL, "", "", "Authorization", "Bearer "+b.token)
		if r.status == 200 {
			return r.json(t)
		}
		if r.status != 202 || time.Now().After(deadline) {
			t.Fatalf("job status: %d %.300s", r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHostileBoundsFanOut: one request to a bot that calls itself ten
// times per level (on the old code, 72,000-83,000 runs and hundreds of MiB
// of AuditEvents) ends with at most bot_max_calls_per_request (100) runs,
// the calls past it refused inside the calling bot naming the limit, and
// at most 101 AuditEvents; the gateway serves on.
func TestHostileBoundsFanOut(t *testing.T) {
	b := startBoundsStack(t, "", "")
	start := time.Now()
	r := b.execute(t, "fanout", `{}`)
	elapsed := time.Since(start)
	if r.status != 200 {
		t.Fatalf("fan-out request: %d %.500s", r.status, r.body)
	}
	var out struct {
		Runs     int      `json:"runs"`
		Messages []string `json:"messages"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("fan-out answer: %v: %.300s", err, r.body)
	}
	t.Logf("fan-out request: %d runs in %v; rejections: %q", out.Runs, elapsed, out.Messages)
	if out.Runs > 100 || out.Runs < 2 {
		t.Errorf("the request made %d runs, want at most 100 (and bot-to-bot calls to work)", out.Runs)
	}
	named := false
	for _, m := range out.Messages {
		if strings.HasPrefix(m, "OperationOutcomeError: ") && strings.Contains(m, "bot_max_calls_per_request") && strings.Contains(m, "at most 100 ") {
			named = true
		}
	}
	if !named {
		t.Errorf("no call was refused naming the limit: %q", out.Messages)
	}
	if n := b.auditEvents(t, b.botID(t, "fanout")); n > 101 || n < out.Runs {
		t.Errorf("%d AuditEvents for a request of %d runs, want between the runs and 101", n, out.Runs)
	} else {
		t.Logf("%d AuditEvents stored for the request", n)
	}
	if r := b.execute(t, "chatty", `{}`); r.status != 200 {
		t.Errorf("another bot after the fan-out: %d %.300s", r.status, r.body)
	}
}

// TestHostileBoundsAsyncResult: an async run of a bot returning 2 MiB
// ends as a failed job whose outcome names bot_async_result_max, with
// nothing of the result stored; 100 KiB completes.
func TestHostileBoundsAsyncResult(t *testing.T) {
	b := startBoundsStack(t, "", "")
	run := func(n int) map[string]any {
		r := b.execute(t, "big", fmt.Sprintf(`{"n":%d}`, n), "Prefer", "respond-async")
		if r.status != 202 || r.header.Get("Content-Location") == "" {
			t.Fatalf("async run: %d %.300s", r.status, r.body)
		}
		return b.pollJob(t, r.header.Get("Content-Location"))
	}
	job := run(2 << 20)
	text, _ := json.Marshal(job["output"])
	if job["status"] != "error" || !strings.Contains(string(text), "bot_async_result_max") || !strings.Contains(string(text), "2097152 bytes") {
		t.Errorf("a 2 MiB async result: job %v %.500s", job["status"], text)
	}
	if strings.Contains(string(text), "xxxxxxxx") {
		t.Errorf("the refused result was stored")
	}
	if job := run(100 << 10); job["status"] != "completed" {
		t.Errorf("a 100 KiB async result: job %v", job["status"])
	}
}

// checkBotRecordsRefused runs chatty until its AuditEvents stop being
// stored, then checks the refusal: async runs answer want with
// Retry-After naming option (once the job's own record no longer fits:
// within a few), AuditEvents are in Caddy's log at Warn with the reason
// (never the console line), and a token exchange still works.
func checkBotRecordsRefused(t *testing.T, b *boundsStack, want int, reason, option string) {
	t.Helper()
	chatty := b.botID(t, "chatty")
	before := b.auditEvents(t, chatty)
	const runs = 30
	for i := range runs {
		if r := b.execute(t, "chatty", `{}`); r.status != 200 {
			t.Fatalf("sync run %d: %d %.300s", i, r.status, r.body)
		}
	}
	stored := b.auditEvents(t, chatty) - before
	if stored >= runs {
		t.Fatalf("all %d AuditEvents were stored", runs)
	}
	accepted := 0
	for {
		r := b.execute(t, "chatty", `{}`, "Prefer", "respond-async")
		if r.status == 202 && accepted < 5 {
			accepted++
			b.pollJob(t, r.header.Get("Content-Location"))
			continue
		}
		if r.status != want || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), option) {
			t.Errorf("async run: %d Retry-After %q %.300s, want %d naming %s", r.status, r.header.Get("Retry-After"), r.body, want, option)
		}
		break
	}
	t.Logf("%d async runs accepted before the refusal", accepted)
	// The accepted jobs' AuditEvents were refused too. AuditEvents are written
	// in batches in the background: count until every run's is accounted
	// for, or a few seconds have passed.
	runsDone := runs + accepted
	var logged int
	for deadline := time.Now().Add(5 * time.Second); ; {
		stored, logged = b.auditEvents(t, chatty)-before, 0
		for _, line := range strings.Split(b.logs(), "\n") {
			if !strings.Contains(line, "bot audit event logged instead of stored") {
				continue
			}
			var entry map[string]any
			if i := strings.IndexByte(line, '{'); i < 0 || json.Unmarshal([]byte(line[i:]), &entry) != nil {
				t.Fatalf("not a JSON log line: %s", line)
			}
			logged++
			if entry["level"] != "warn" || entry["reason"] != reason || entry["bot"] != "Bot/"+chatty || entry["project"] != "alpha" || entry["trace_id"] == nil {
				t.Errorf("logged AuditEvent: %s", line)
			}
			if strings.Contains(line, "CHATTY-CONSOLE-LINE") {
				t.Errorf("the log carries the bot's console output: %s", line)
			}
		}
		if stored+logged >= runsDone || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if stored+logged != runsDone {
		t.Errorf("%d runs: %d AuditEvents stored and %d logged; none may be dropped", runsDone, stored, logged)
	}
	t.Logf("%d runs: %d AuditEvents stored, %d logged (%s)", runsDone, stored, logged, reason)
	m := do(t, "GET", "http://"+b.adminAddr+"/metrics", "", "")
	for _, want := range []string{
		fmt.Sprintf(`caddy_fhirgate_bot_records_refused_total{reason=%q,record="audit_event"} %d`, reason, logged),
		fmt.Sprintf(`caddy_fhirgate_bot_records_refused_total{reason=%q,record="async_job"}`, reason),
	} {
		if !strings.Contains(string(m.body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if r := do(t, "POST", b.gateway+"/oauth2/token", "application/x-www-form-urlencoded", exchangeForm("alpha-app", "alice-token")); r.status != 200 {
		t.Errorf("token exchange with bot records refused: %d %s", r.status, jsonField(r.body, "error"))
	}
}

// TestHostileBoundsProjectQuota: a project with a tiny quota of bot
// records gets its async runs answered 429 and its AuditEvents logged
// instead of stored, while its users still sign in.
func TestHostileBoundsProjectQuota(t *testing.T) {
	b := startBoundsStack(t, "", "project_bot_records_max 16KiB")
	checkBotRecordsRefused(t, b, 429, "quota", "project_bot_records_max")
}

// TestHostileBoundsDiskReserve: with the store's disk (a 64 MiB tmpfs)
// filled to below bot_records_disk_reserve but above the store's own
// reserve, bot records are refused (async 503, AuditEvents logged) and
// token exchanges, which write a Login, still work.
func TestHostileBoundsDiskReserve(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64m,mode=0700"); err != nil {
		t.Skipf("cannot mount a small tmpfs for the store (needs root with CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	b := startBoundsStack(t, filepath.Join(dir, "store"), "bot_records_disk_reserve 40MiB")
	if r := b.execute(t, "chatty", `{}`); r.status != 200 {
		t.Fatalf("a run before the disk fills: %d %.300s", r.status, r.body)
	}
	// Its AuditEvent is written in the background, in a batch: let it be
	// stored before the disk fills, so every later one is a refused one.
	chatty := b.botID(t, "chatty")
	for deadline := time.Now().Add(10 * time.Second); b.auditEvents(t, chatty) < 1; {
		if time.Now().After(deadline) {
			t.Fatal("the AuditEvent of the run before the disk fills was not stored")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Leave about 30 MiB: under the 40 MiB bot-record reserve, well over
	// the store's 16 MiB.
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	if free < 40<<20 {
		t.Fatalf("only %d MiB free on a fresh 64 MiB store filesystem", free>>20)
	}
	if err := os.WriteFile(filepath.Join(dir, "filler"), make([]byte, free-30<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the store's reading of free space is cached for a second
	checkBotRecordsRefused(t, b, 503, "disk", "bot_records_disk_reserve")
}

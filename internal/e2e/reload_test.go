package e2e

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/template"
	"time"
)

// The reload suite: `caddy reload` of the same config (--force) and of a
// changed one while authenticated reads, token exchanges and bot runs keep
// coming from several goroutines. Every request must be answered 200 with
// no retry: the test never retries, and a request net/http resends on its
// own after its connection failed counts as dropped (one it resends before
// writing anything never reached the server and is only counted). The
// store must never meet its own directory lock, and nothing stored may be
// lost.

// reloadChangedExtra is added to the stack's global options by the changed
// config: a new token lifetime and a new project with a declared user and
// bot.
const reloadChangedExtra = `access_token_ttl 2h
		project gamma {
			name Gamma
			client gamma-app {
				userinfo_url {{.IdP}}/userinfo
			}
			user carol@example.com {
				profile Practitioner/carol
			}
			bot hello {
				identifier https://example.com/bots|hello
				source {{.Testdata}}/echo.ts
			}
		}`

// loadStats counts one kind of request of the load.
type loadStats struct {
	name string
	ok   atomic.Int64
	// safeRetries are requests net/http sent again because their first
	// connection failed before any of the request was written: invisible
	// to the server and allowed, but a sign of connections closed under
	// the client.
	safeRetries atomic.Int64
	mu          sync.Mutex
	// failures are answers that are not the expected 200.
	failures []string
	// drops are requests whose connection failed after they were sent:
	// a transport error, or net/http resending the request on its own.
	drops []string
}

func (l *loadStats) record(r response, d delivery, err error, check func(response) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		l.drops = append(l.drops, err.Error())
	case d.retriedAfterWrite:
		l.drops = append(l.drops, fmt.Sprintf("connection failed after the request was sent; net/http resent it (then %d)", r.status))
	case check(r) != nil:
		l.failures = append(l.failures, check(r).Error())
	default:
		l.ok.Add(1)
	}
	if err == nil && d.conns > 1 && !d.retriedAfterWrite {
		l.safeRetries.Add(1)
	}
}

// loadGen runs request loops on several goroutines until stopped.
type loadGen struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	stats []*loadStats
}

func newLoadGen() *loadGen { return &loadGen{stop: make(chan struct{})} }

// add starts workers goroutines each sending one(i) for i = 0, 1, … and
// checking the answer.
func (g *loadGen) add(name string, workers int, one func(i int) (response, delivery, error), check func(i int, r response) error) {
	l := &loadStats{name: name}
	g.stats = append(g.stats, l)
	for range workers {
		g.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-g.stop:
					return
				default:
				}
				r, d, err := one(i)
				l.record(r, d, err, func(r response) error { return check(i, r) })
			}
		})
	}
}

// finish stops the load, logs it, and fails the test if a kind of
// request never succeeded (the load did not run).
func (g *loadGen) finish(t *testing.T) {
	t.Helper()
	close(g.stop)
	g.wg.Wait()
	for _, l := range g.stats {
		t.Logf("%s: %d ok, %d failed, %d dropped, %d resent before anything was written",
			l.name, l.ok.Load(), len(l.failures), len(l.drops), l.safeRetries.Load())
		if l.ok.Load() == 0 {
			t.Errorf("%s: none succeeded: the load did not run", l.name)
		}
	}
}

// checkAnswers fails for any answer that was not the expected one.
func (g *loadGen) checkAnswers(t *testing.T) {
	t.Helper()
	for _, l := range g.stats {
		if len(l.failures) > 0 {
			t.Errorf("%s: %d wrong answers, first: %s", l.name, len(l.failures), l.failures[0])
		}
	}
}

// checkDrops fails for any request whose connection failed after it was
// sent.
func (g *loadGen) checkDrops(t *testing.T) {
	t.Helper()
	for _, l := range g.stats {
		if len(l.drops) > 0 {
			t.Errorf("%s: %d dropped, first: %s", l.name, len(l.drops), l.drops[0])
		}
	}
}

// reloadDropsBug is the known Caddy behaviour behind dropped requests.
const reloadDropsBug = "BUG: `caddy reload` under load drops a few in-flight HTTP/1.1 requests per reload " +
	"(connection reset, EOF, \"server closed idle connection\") — Caddy 2.11.9 itself, without fhirgate too " +
	"(TestReloadWithoutFhirgate): the old config's SO_REUSEPORT socket and its idle keep-alive connections " +
	"are closed under clients; POSTs (exchanges, bot runs) fail, GETs are resent by net/http"

func TestReloadUnderLoad(t *testing.T) {
	s := startStack(t, "")
	t.Cleanup(loadClient.CloseIdleConnections) // see startStackFrom
	admin := "http://" + s.adminAddr + "/fhirgate"

	// The changed config is the same template with more global options.
	cfg := stackConfig{IdP: s.idp.URL, Backend: s.backend.URL}
	cfg.Admin, _ = strconv.Atoi(strings.TrimPrefix(s.adminAddr, "localhost:"))
	cfg.Gateway, _ = strconv.Atoi(s.gateway[strings.LastIndex(s.gateway, ":")+1:])
	cfg.Testdata, _ = filepath.Abs("testdata")
	var extra strings.Builder
	if err := template.Must(template.New("extra").Parse(reloadChangedExtra)).Execute(&extra, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Extra = extra.String()
	changed := writeCaddyfile(t, t.TempDir(), stackCaddyfile, cfg)

	// Records that exist before the reloads: declared ones and some made
	// through the admin API, which no config mentions.
	if r := do(t, "POST", admin+"/User", "application/json", `{"email":"made-by-admin@example.com"}`); r.status != 201 {
		t.Fatalf("admin user: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", admin+"/Bot", "application/json", `{"name":"admin-bot","meta":{"project":"alpha"},"identifier":[{"system":"https://example.com/bots","value":"admin-bot"}]}`); r.status != 201 {
		t.Fatalf("admin bot: %d %s", r.status, r.body)
	}
	usersBefore, botsBefore := s.adminList(t, "User"), s.adminList(t, "Bot")
	var preTokens []string
	for range 3 {
		preTokens = append(preTokens, s.token(t, "alpha-app", "alice-token"))
	}
	echo := s.gateway + "/fhir/R4/Bot/$execute?identifier=" + url.QueryEscape("https://example.com/bots|echo")

	load := newLoadGen()
	load.add("proxied reads with tokens issued before the reloads", 2,
		func(i int) (response, delivery, error) {
			return tryTraced("GET", s.gateway+"/fhir/R4/Patient/"+strconv.Itoa(i), "", "", "Authorization", "Bearer "+preTokens[i%len(preTokens)])
		},
		func(i int, r response) error {
			if r.status != 200 || !strings.Contains(string(r.body), `"id":"`+strconv.Itoa(i)+`"`) {
				return fmt.Errorf("%d %s", r.status, r.body)
			}
			return nil
		})
	load.add("token exchanges", 2,
		func(int) (response, delivery, error) {
			return tryTraced("POST", s.gateway+"/oauth2/token", "application/x-www-form-urlencoded", exchangeForm("alpha-app", "alice-token"))
		},
		func(_ int, r response) error {
			if r.status != 200 || jsonField(r.body, "access_token") == "" {
				return fmt.Errorf("%d %s", r.status, r.body)
			}
			return nil
		})
	load.add("bot runs", 2,
		func(i int) (response, delivery, error) {
			return tryTraced("POST", echo, "text/plain", "ping-"+strconv.Itoa(i), "Authorization", "Bearer "+preTokens[i%len(preTokens)])
		},
		func(i int, r response) error {
			if r.status != 200 || string(r.body) != "ping-"+strconv.Itoa(i) {
				return fmt.Errorf("%d %s", r.status, r.body)
			}
			return nil
		})

	reload := func(what, config string, args ...string) {
		t.Helper()
		start := time.Now()
		out, err := s.cli(append([]string{"reload", "--config", config}, args...)...)
		if err != nil {
			t.Errorf("caddy reload (%s): %v\n%s", what, err, out)
		}
		t.Logf("reload (%s) took %v", what, time.Since(start).Round(time.Millisecond))
	}
	time.Sleep(200 * time.Millisecond)
	sameReloads, changedReloads := 0, 0
	// Each round ends on the changed config, which the checks below expect.
	deadline := time.Now().Add(soakDuration(t, 0, 5*time.Minute))
	for {
		// (a) the same config, forced: a full provision/cleanup cycle on
		// the shared store with nothing changed.
		for range 4 {
			reload("same config, --force", s.config, "--force")
			sameReloads++
		}
		// (b) a changed config, and back again in soak rounds.
		reload("changed config", changed)
		changedReloads++
		if !time.Now().Before(deadline) {
			break
		}
		reload("back to the first config", s.config)
		changedReloads++
	}
	time.Sleep(200 * time.Millisecond)
	load.finish(t)
	t.Logf("%d same-config and %d changed-config reloads", sameReloads, changedReloads)

	t.Run("every answer is a 200", load.checkAnswers)
	t.Run("no request dropped by a reload", func(t *testing.T) {
		knownBug(t, reloadDropsBug)
		load.checkDrops(t)
	})
	t.Run("no lock or other errors in the log", func(t *testing.T) {
		if bad := errorLines(s.logs()); len(bad) > 0 {
			t.Fatalf("%d error lines, first: %s", len(bad), bad[0])
		}
	})
	t.Run("no record lost", func(t *testing.T) {
		usersAfter, botsAfter := s.adminList(t, "User"), s.adminList(t, "Bot")
		for id := range usersBefore {
			if !usersAfter[id] {
				t.Errorf("User/%s lost", id)
			}
		}
		for id := range botsBefore {
			if !botsAfter[id] {
				t.Errorf("Bot/%s lost", id)
			}
		}
	})
	t.Run("changed config applied", func(t *testing.T) {
		if r := do(t, "GET", admin+"/User?email=carol@example.com", "", ""); !strings.Contains(string(r.body), "carol@example.com") {
			t.Errorf("declared user of the changed config: %d %s", r.status, r.body)
		}
		s.botID(t, "gamma", "https://example.com/bots|hello")
		r := do(t, "POST", s.gateway+"/oauth2/token", "application/x-www-form-urlencoded", exchangeForm("alpha-app", "alice-token"))
		if exp := r.json(t)["expires_in"]; exp != float64(7200) {
			t.Errorf("expires_in %v after access_token_ttl 2h", exp)
		}
	})
	t.Run("tokens issued before the reloads still valid", func(t *testing.T) {
		for i, tok := range preTokens {
			if r := do(t, "GET", s.gateway+"/fhir/R4/Patient/after", "", "", "Authorization", "Bearer "+tok); r.status != 200 {
				t.Errorf("token %d: %d %s", i, r.status, r.body)
			}
		}
	})
}

// plainCaddyfile is Caddy without fhirgate, for the baseline below.
const plainCaddyfile = `{
	admin localhost:{{.Admin}}
	skip_install_trust
}

http://localhost:{{.Gateway}} {
	respond "plain" 200
}
`

// TestReloadWithoutFhirgate is the baseline of the dropped-request bug:
// the same load and reloads against Caddy with only a `respond` handler.
// It shows the drops are Caddy's; it runs with FHIRGATE_KNOWN_BUGS=1.
func TestReloadWithoutFhirgate(t *testing.T) {
	knownBug(t, reloadDropsBug)
	s := startStackFrom(t, plainCaddyfile, faultConfig{})
	load := newLoadGen()
	load.add("POSTs to plain Caddy", 4,
		func(i int) (response, delivery, error) {
			return tryTraced("POST", s.gateway+"/", "text/plain", "x")
		},
		func(_ int, r response) error {
			if r.status != 200 || string(r.body) != "plain" {
				return fmt.Errorf("%d %s", r.status, r.body)
			}
			return nil
		})
	time.Sleep(100 * time.Millisecond)
	for range 5 {
		if out, err := s.cli("reload", "--config", s.config, "--force"); err != nil {
			t.Fatalf("caddy reload: %v\n%s", err, out)
		}
	}
	time.Sleep(100 * time.Millisecond)
	load.finish(t)
	load.checkAnswers(t)
	load.checkDrops(t)
}

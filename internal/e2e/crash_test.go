package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The crash durability suite: SIGKILL the gateway at a random moment while
// admin API creates, bot deploys and token exchanges stream in, restart it
// on the same store, and check that every write the gateway acknowledged
// (a 2xx the client received) is there, that the store opened without
// complaint, and that every access token it issued still verifies.

// crashLedger records what the gateway acknowledged, across crash cycles.
type crashLedger struct {
	mu     sync.Mutex
	users  map[string]string // id → email
	tokens []string
	// unexpected are non-2xx answers received before the kill: a healthy
	// gateway under this load must not produce any.
	unexpected []string
}

func (l *crashLedger) unexpectedAnswer(what string, r response) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unexpected = append(l.unexpected, fmt.Sprintf("%s: %d %s", what, r.status, r.body))
}

// crashBot is one bot that a single goroutine deploys again and again, so
// "the last acknowledged deploy" is well defined.
type crashBot struct {
	id string
	// acked is the version of the last acknowledged deploy and ackedURL
	// its executableCode.url; inFlight is the version sent when the kill
	// came (0 when none was in flight). During a cycle only the bot's
	// goroutine writes them, under crashLedger.mu.
	acked    int
	ackedURL string
	inFlight int
}

// botCode is version v of bot b: it answers its own version, so running
// the bot tells which deploy is live.
func botCode(b, v int) string {
	return fmt.Sprintf("exports.handler = async () => 'crash-bot-%d-v%d';\n", b, v)
}

func TestCrashDurability(t *testing.T) {
	s := startStack(t, "")
	t.Cleanup(loadClient.CloseIdleConnections) // see startStackFrom
	admin := "http://" + s.adminAddr + "/fhirgate"
	ledger := &crashLedger{users: map[string]string{}}

	bots := make([]*crashBot, 3)
	for i := range bots {
		body := fmt.Sprintf(`{"name":"crash-%d","meta":{"project":"alpha"},"identifier":[{"system":"https://example.com/crash","value":"b%d"}]}`, i, i)
		r := do(t, "POST", admin+"/Bot", "application/json", body)
		if r.status != 201 {
			t.Fatalf("creating bot %d: %d %s", i, r.status, r.body)
		}
		bots[i] = &crashBot{id: r.json(t)["id"].(string)}
		bots[i].deploy(t, i, 0, admin)
	}

	cycles := 2
	deadline := time.Now().Add(soakDuration(t, 0, 5*time.Minute))
	for cycle := 0; cycle < cycles || time.Now().Before(deadline); cycle++ {
		t.Run(fmt.Sprintf("kill -9 during writes, cycle %d", cycle), func(t *testing.T) {
			runCrashCycle(t, s, admin, cycle, bots, ledger)
		})
		if t.Failed() {
			return
		}
	}
}

func runCrashCycle(t *testing.T, s *stack, admin string, cycle int, bots []*crashBot, ledger *crashLedger) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}

	users, tokens := len(ledger.users), len(ledger.tokens)
	deploys := make([]int, len(bots))
	for i, b := range bots {
		deploys[i] = b.acked
	}

	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stopped(); i++ {
				email := fmt.Sprintf("crash-c%d-w%d-%d@example.com", cycle, w, i)
				r, err := try("POST", admin+"/User", "application/json", `{"email":"`+email+`"}`)
				if err != nil {
					return // the gateway is gone: this write was never acknowledged
				}
				if r.status != 201 {
					ledger.unexpectedAnswer("create user", r)
					return
				}
				var u struct{ ID string }
				_ = json.Unmarshal(r.body, &u)
				ledger.mu.Lock()
				ledger.users[u.ID] = email
				ledger.mu.Unlock()
			}
		})
	}
	for i, b := range bots {
		wg.Go(func() {
			for !stopped() {
				v := b.acked + 1
				ledger.mu.Lock()
				b.inFlight = v
				ledger.mu.Unlock()
				r, err := try("POST", admin+"/Bot/"+b.id+"/$deploy", "application/json",
					fmt.Sprintf(`{"code":%q,"filename":"index.js"}`, botCode(i, v)))
				if err != nil {
					return
				}
				if r.status != 200 {
					ledger.unexpectedAnswer("deploy", r)
					return
				}
				var bot struct{ ExecutableCode struct{ URL string } }
				_ = json.Unmarshal(r.body, &bot)
				ledger.mu.Lock()
				b.acked, b.ackedURL, b.inFlight = v, bot.ExecutableCode.URL, 0
				ledger.mu.Unlock()
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for !stopped() {
				r, err := try("POST", s.gateway+"/oauth2/token", "application/x-www-form-urlencoded", exchangeForm("alpha-app", "alice-token"))
				if err != nil {
					return
				}
				tok := jsonField(r.body, "access_token")
				if r.status != 200 || tok == "" {
					ledger.unexpectedAnswer("exchange", r)
					return
				}
				ledger.mu.Lock()
				ledger.tokens = append(ledger.tokens, tok)
				ledger.mu.Unlock()
			}
		})
	}

	// Kill at a random moment once every kind of write is flowing, so no
	// cycle can pass without having tested something.
	start := time.Now()
	flowing := func() bool {
		ledger.mu.Lock()
		defer ledger.mu.Unlock()
		return len(ledger.users) > users && len(ledger.tokens) > tokens && !slices.Equal(deploys, ackedVersions(bots))
	}
	for !flowing() && time.Since(start) < 30*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if flowing() {
		extra := rand.N(800 * time.Millisecond)
		if soaking() {
			extra = rand.N(3 * time.Second)
		}
		time.Sleep(extra)
	}
	delay := time.Since(start)
	s.kill()
	close(stop)
	wg.Wait()

	ledger.mu.Lock()
	t.Logf("killed %v after the writes started: acknowledged %d user creates, %d exchanges, bot deploys %v → %v",
		delay.Round(time.Millisecond), len(ledger.users)-users, len(ledger.tokens)-tokens, deploys, ackedVersions(bots))
	unexpected := ledger.unexpected
	ledger.mu.Unlock()
	if len(unexpected) > 0 {
		t.Fatalf("%d non-2xx answers before the kill, first: %s", len(unexpected), unexpected[0])
	}
	if !flowing() {
		t.Fatalf("after %v some kind of write was still never acknowledged: users %d→%d, tokens %d→%d, deploys %v→%v",
			delay, users, len(ledger.users), tokens, len(ledger.tokens), deploys, ackedVersions(bots))
	}

	before := len(s.logs())
	s.start(s.config)

	t.Run("store opened cleanly", func(t *testing.T) {
		if bad := errorLines(s.logs()[before:]); len(bad) > 0 {
			t.Fatalf("the restarted gateway logged %d errors, first: %s", len(bad), bad[0])
		}
	})
	t.Run("every acknowledged user is there", func(t *testing.T) {
		for id, email := range ledger.users {
			r := do(t, "GET", admin+"/User/"+id, "", "")
			if r.status != 200 || !strings.EqualFold(jsonField(r.body, "email"), email) {
				t.Fatalf("User/%s (%s): %d %s", id, email, r.status, r.body)
			}
		}
	})
	t.Run("every bot runs its last acknowledged deploy", func(t *testing.T) {
		auth := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
		for i, b := range bots {
			r := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+b.id+"/$execute", "text/plain", "x", auth...)
			if r.status != 200 {
				t.Fatalf("bot %d: %d %s", i, r.status, r.body)
			}
			live := string(r.body)
			switch live {
			case fmt.Sprintf("crash-bot-%d-v%d", i, b.acked):
				stored := do(t, "GET", admin+"/Bot/"+b.id, "", "")
				var bot struct{ ExecutableCode struct{ URL string } }
				_ = json.Unmarshal(stored.body, &bot)
				if bot.ExecutableCode.URL != b.ackedURL {
					t.Fatalf("bot %d runs v%d but its executableCode is %q, the acknowledged deploy said %q",
						i, b.acked, bot.ExecutableCode.URL, b.ackedURL)
				}
			case fmt.Sprintf("crash-bot-%d-v%d", i, b.inFlight):
				// The deploy in flight at the kill reached the disk but its
				// answer never reached the client: allowed, and now the
				// acknowledged state.
				stored := do(t, "GET", admin+"/Bot/"+b.id, "", "")
				var bot struct{ ExecutableCode struct{ URL string } }
				_ = json.Unmarshal(stored.body, &bot)
				b.acked, b.ackedURL = b.inFlight, bot.ExecutableCode.URL
				t.Logf("bot %d: the deploy in flight at the kill (v%d) was stored before its answer was sent", i, b.inFlight)
			default:
				t.Fatalf("bot %d runs %q: last acknowledged deploy v%d, in flight v%d", i, live, b.acked, b.inFlight)
			}
			b.inFlight = 0
		}
	})
	t.Run("every issued token still verifies", func(t *testing.T) {
		ledger.mu.Lock()
		all := append([]string(nil), ledger.tokens...)
		ledger.mu.Unlock()
		failures := make(chan string, len(all))
		jobs := make(chan string)
		var vw sync.WaitGroup
		for range 8 {
			vw.Go(func() {
				for tok := range jobs {
					r, err := try("GET", s.gateway+"/fhir/R4/Patient/crash", "", "", "Authorization", "Bearer "+tok)
					if err != nil || r.status != 200 {
						failures <- fmt.Sprintf("%v %d %s", err, r.status, r.body)
					}
				}
			})
		}
		for _, tok := range all {
			jobs <- tok
		}
		close(jobs)
		vw.Wait()
		close(failures)
		if n := len(failures); n > 0 {
			t.Fatalf("%d of %d issued tokens no longer verify, first: %s", n, len(all), <-failures)
		}
	})
}

func (b *crashBot) deploy(t *testing.T, i, v int, admin string) {
	t.Helper()
	r := do(t, "POST", admin+"/Bot/"+b.id+"/$deploy", "application/json",
		fmt.Sprintf(`{"code":%q,"filename":"index.js"}`, botCode(i, v)))
	if r.status != 200 {
		t.Fatalf("deploying bot %d v%d: %d %s", i, v, r.status, r.body)
	}
	b.acked, b.ackedURL = v, r.json(t)["executableCode"].(map[string]any)["url"].(string)
}

func ackedVersions(bots []*crashBot) []int {
	v := make([]int, len(bots))
	for i, b := range bots {
		v[i] = b.acked
	}
	return v
}

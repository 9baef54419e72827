package e2e

import (
	"cmp"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// Two real Caddy processes on one real PostgreSQL database (created for
// the run, dropped after; the replicas reach it through a TCP proxy that
// the outage case cuts — the shared server itself is never restarted).

// replicaCaddyfile is one replica's config; both replicas run it, each on
// its own ports. The issuer is shared, as docs/replicas.md asks.
const replicaCaddyfile = `{
	admin localhost:{{.Admin}}
	skip_install_trust
	fhirgate {
		storage postgres {
			dsn {env.FHIRGATE_POSTGRES_DSN}
			max_conns 8
			timeout 3s
		}
		issuer http://gw.replicas.test
		project alpha {
			client alpha-app {
				userinfo_url {{.IdP}}/userinfo
			}
			user alice@example.com {
				profile Practitioner/alice
				admin
			}
			user bob@example.com {
				profile Practitioner/bob
			}
			bot echo {
				identifier https://example.com/bots|echo
				source {{.Testdata}}/echo.ts
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

// staleness is the contract's bound for a change made on one replica to
// act on another.
const staleness = time.Second

// replicaPair is replicas A and B with what they share.
type replicaPair struct {
	t       *testing.T // the whole test's: the proxy outlives a subtest
	a, b    *stack
	proxy   *pgkvtest.Proxy
	pgAddr  string // the proxy's address
	pgReal  string // the server's
	idp     string
	backend *backend
	dsn     string // the shared schema's, for looking at River's jobs
}

func startReplicaPair(t *testing.T) *replicaPair {
	t.Helper()
	return startReplicaPairWith(t, replicaCaddyfile, "")
}

// startReplicaPairWith starts the pair on another template; backendURL,
// when set, is the FHIR backend instead of a recording one.
func startReplicaPairWith(t *testing.T, tmpl, backendURL string) *replicaPair {
	t.Helper()
	dsn := pgkvtest.DSN(t)
	rp := &replicaPair{t: t, pgAddr: pgkvtest.FreeAddr(t), dsn: dsn}
	var proxied string
	proxied, rp.pgReal = pgkvtest.ViaProxy(t, dsn, rp.pgAddr)
	rp.proxy = pgkvtest.StartProxy(t, rp.pgAddr, rp.pgReal)
	idp := newIdP(t, map[string]string{
		"alice-token": `{"sub":"sub-alice","email":"alice@example.com","email_verified":true}`,
		"bob-token":   `{"sub":"sub-bob","email":"bob@example.com","email_verified":true}`,
	})
	rp.idp, rp.backend = idp.URL, newBackend(t)
	testdata, _ := filepath.Abs("testdata")
	start := func() *stack {
		cfg := stackConfig{Admin: freePort(t), Gateway: freePort(t), IdP: rp.idp, Backend: cmp.Or(backendURL, rp.backend.URL), Testdata: testdata}
		path := writeCaddyfile(t, t.TempDir(), tmpl, cfg)
		p := startCaddy(t, path, cfg.Admin, "FHIRGATE_POSTGRES_DSN="+proxied)
		return &stack{caddyProc: p, config: path, gateway: "http://localhost:" + strconv.Itoa(cfg.Gateway), idp: idp, backend: rp.backend}
	}
	rp.a = start()
	rp.b = start()
	return rp
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// within polls check until it holds or bound has passed since from, then
// checks once more (so a slow request is not counted against the bound),
// and returns how long the change took to show.
func within(t *testing.T, what string, from time.Time, bound time.Duration, check func() bool) time.Duration {
	t.Helper()
	for time.Since(from) < bound {
		if check() {
			took := time.Since(from)
			t.Logf("%s: after %v", what, took)
			return took
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !check() {
		t.Fatalf("%s: not within %v", what, bound)
	}
	return bound
}

// membershipOf finds a user's membership in project alpha through a
// replica's admin API.
func (s *stack) membershipOf(t *testing.T, profile string) map[string]any {
	t.Helper()
	r := do(t, "GET", "http://"+s.adminAddr+"/fhirgate/ProjectMembership?project=alpha", "", "")
	for _, e := range r.json(t)["entry"].([]any) {
		res := e.(map[string]any)["resource"].(map[string]any)
		if res["profile"].(map[string]any)["reference"] == profile {
			return res
		}
	}
	t.Fatalf("no membership for %s: %s", profile, r.body)
	return nil
}

// TestReplicasShareOnePostgreSQL runs the two-replica contract end to end.
func TestReplicasShareOnePostgreSQL(t *testing.T) {
	rp := startReplicaPair(t)
	a, b := rp.a, rp.b
	patient := "/fhir/R4/Patient/1"

	alice := a.token(t, "alpha-app", "alice-token")
	echo := b.gateway + "/fhir/R4/Bot/$execute?identifier=" + url.QueryEscape("https://example.com/bots|echo")
	t.Run("exchange on A, read and $execute on B", func(t *testing.T) {
		if r := do(t, "GET", b.gateway+patient, "", "", bearer(alice)...); r.status != 200 {
			t.Fatalf("read on B with A's token: %d %s", r.status, r.body)
		}
		if r := do(t, "POST", echo, "text/plain", "hi", bearer(alice)...); r.status != 200 || string(r.body) != "hi" {
			t.Fatalf("$execute on B: %d %s", r.status, r.body)
		}
	})

	t.Run("bot deployed on A runs on B", func(t *testing.T) {
		id := a.botID(t, "alpha", "https://example.com/bots|echo")
		code := `export async function handler(medplum, event) { return "v2 " + event.input; }`
		a.adminCall(t, "POST", "/fhirgate/Bot/"+id+"/$deploy", mustJSON(t, map[string]string{"filename": "index.ts", "code": code}))
		deployed := time.Now()
		first := do(t, "POST", echo, "text/plain", "hi", bearer(alice)...)
		t.Logf("B's first $execute after the deploy on A: %d %q", first.status, first.body)
		within(t, "B running the version deployed on A", deployed, staleness, func() bool {
			r := do(t, "POST", echo, "text/plain", "hi", bearer(alice)...)
			return r.status == 200 && string(r.body) == "v2 hi"
		})
	})

	t.Run("async $execute accepted on A, run by the queue, polled on B", func(t *testing.T) {
		rp.asyncAcrossReplicas(t, echo, alice)
	})

	t.Run("keys rotated on A verify on B", func(t *testing.T) {
		if out, err := a.cli("fhirgate", "keys", "rotate", "--address", a.adminAddr); err != nil {
			t.Fatalf("keys rotate on A: %v %s", err, out)
		}
		fresh := a.token(t, "alpha-app", "alice-token")
		if r := do(t, "GET", b.gateway+patient, "", "", bearer(fresh)...); r.status != 200 {
			t.Fatalf("A's token signed with its new key, on B: %d %s", r.status, r.body)
		}
		if r := do(t, "GET", b.gateway+patient, "", "", bearer(alice)...); r.status != 200 {
			t.Fatalf("a token of the retired key, on B: %d %s", r.status, r.body)
		}
	})

	t.Run("revoke on A, 401 on B", func(t *testing.T) {
		tok := a.token(t, "alpha-app", "alice-token")
		if r := do(t, "GET", b.gateway+patient, "", "", bearer(tok)...); r.status != 200 {
			t.Fatalf("before: %d", r.status)
		}
		form := url.Values{"token": {tok}, "client_id": {"alpha-app"}}
		if r := do(t, "POST", a.gateway+"/oauth2/revoke", "application/x-www-form-urlencoded", form.Encode()); r.status != 200 {
			t.Fatalf("revoke on A: %d %s", r.status, r.body)
		}
		within(t, "B refusing the token revoked on A", time.Now(), staleness, func() bool {
			return do(t, "GET", b.gateway+patient, "", "", bearer(tok)...).status == 401
		})
	})

	t.Run("membership deactivated on A, refused on B", func(t *testing.T) {
		bob := a.token(t, "alpha-app", "bob-token")
		if r := do(t, "GET", b.gateway+patient, "", "", bearer(bob)...); r.status != 200 {
			t.Fatalf("bob before: %d", r.status)
		}
		b.token(t, "alpha-app", "bob-token") // B's token endpoint now holds bob's client, user and membership
		exchange := url.Values{
			"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "client_id": {"alpha-app"},
			"subject_token": {"bob-token"}, "subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
		}.Encode()
		m := a.membershipOf(t, "Practitioner/bob")
		m["active"] = false
		start := time.Now()
		a.adminCall(t, "PUT", "/fhirgate/ProjectMembership/"+m["id"].(string), mustJSON(t, m))
		within(t, "B refusing the membership deactivated on A", start, staleness, func() bool {
			return do(t, "GET", b.gateway+patient, "", "", bearer(bob)...).status == 401
		})
		within(t, "B's token endpoint refusing the membership deactivated on A", start, staleness, func() bool {
			return do(t, "POST", b.gateway+"/oauth2/token", "application/x-www-form-urlencoded", exchange).status == 400
		})
	})

	t.Run("one email created on A and B at once", func(t *testing.T) {
		for i := range 5 {
			email := fmt.Sprintf("race-%d@example.com", i)
			var wg sync.WaitGroup
			var ra, rb response
			wg.Go(func() {
				ra = do(t, "POST", "http://"+a.adminAddr+"/fhirgate/User", "application/json", `{"email":"`+email+`"}`)
			})
			wg.Go(func() {
				rb = do(t, "POST", "http://"+b.adminAddr+"/fhirgate/User", "application/json", `{"email":"`+email+`"}`)
			})
			wg.Wait()
			codes := []int{ra.status, rb.status}
			if !(codes[0] == 201 && codes[1] == 409 || codes[0] == 409 && codes[1] == 201) {
				t.Fatalf("%s: A %d %s, B %d %s; want one 201 and one 409", email, ra.status, ra.body, rb.status, rb.body)
			}
		}
	})

	t.Run("PostgreSQL unreachable under load", func(t *testing.T) {
		rp.outage(t, alice)
	})

	t.Run("kill -9 of A under load", func(t *testing.T) {
		rp.killA(t, alice)
	})
}

// load writes users through a replica's admin API until stopped, and
// records the emails it acknowledged and the statuses it got.
type load struct {
	mu       sync.Mutex
	acked    []string
	statuses map[int]int
	noRetry  int // 503s without Retry-After
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

func startLoad(admin, prefix string) *load {
	l := &load{statuses: map[int]int{}, stop: make(chan struct{})}
	l.wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			default:
			}
			email := fmt.Sprintf("%s-%d@example.com", prefix, i)
			r, err := try("POST", admin+"/fhirgate/User", "application/json", `{"email":"`+email+`"}`)
			l.mu.Lock()
			switch {
			case err != nil:
				l.statuses[0]++
			default:
				l.statuses[r.status]++
				if r.status == 201 {
					l.acked = append(l.acked, email)
				}
				if r.status == 503 && r.header.Get("Retry-After") == "" {
					l.noRetry++
				}
			}
			l.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	})
	return l
}

func (l *load) count(status int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.statuses[status]
}

func (l *load) end() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// checkStored fails unless every acknowledged email is a user, read
// through the replica s.
func (l *load) checkStored(t *testing.T, s *stack) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.acked) == 0 {
		t.Fatal("no write was acknowledged")
	}
	for _, email := range l.acked {
		r := do(t, "GET", "http://"+s.adminAddr+"/fhirgate/User?email="+url.QueryEscape(email), "", "")
		if r.status != 200 || !strings.Contains(string(r.body), email) {
			t.Fatalf("acknowledged write lost: User %s: %d %s", email, r.status, r.body)
		}
	}
}

// outage cuts both replicas from PostgreSQL while B takes writes: they
// answer 503 with Retry-After meanwhile, a token B already verified answers
// from its caches or 503 (never 401), and once the server is reachable
// again B recovers by itself with nothing acknowledged lost.
func (rp *replicaPair) outage(t *testing.T, token string) {
	b := rp.b
	admin := "http://" + b.adminAddr
	l := startLoad(admin, "outage")
	defer l.end()
	within(t, "writes acknowledged before the outage", time.Now(), 30*time.Second, func() bool { return l.count(201) >= 5 })
	rp.proxy.Cut()
	cut := time.Now()
	within(t, "writes refused with 503", cut, 30*time.Second, func() bool { return l.count(503) >= 5 })
	for range 20 {
		r, err := try("GET", b.gateway+"/fhir/R4/Patient/1", "", "", bearer(token)...)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != 200 && r.status != 503 {
			t.Fatalf("a verified token during the outage: %d %s; want 200 (caches) or 503", r.status, r.body)
		}
		if r.status == 503 && r.header.Get("Retry-After") == "" {
			t.Fatal("503 without Retry-After")
		}
	}
	rp.proxy = pgkvtest.StartProxy(rp.t, rp.pgAddr, rp.pgReal)
	back := l.count(201)
	within(t, "writes acknowledged again after PostgreSQL returned", time.Now(), 60*time.Second, func() bool { return l.count(201) >= back+5 })
	if r := do(t, "GET", b.gateway+"/fhir/R4/Patient/1", "", "", bearer(token)...); r.status != 200 {
		t.Fatalf("the token after recovery: %d %s", r.status, r.body)
	}
	l.end()
	l.mu.Lock()
	if l.noRetry > 0 {
		t.Errorf("%d 503s without Retry-After", l.noRetry)
	}
	for status, n := range l.statuses {
		if status != 201 && status != 503 {
			t.Errorf("%d writes answered %d during the outage; want 201 or 503", n, status)
		}
	}
	t.Logf("outage: statuses %v", l.statuses)
	l.mu.Unlock()
	l.checkStored(t, b)
}

// killA kills replica A with SIGKILL while it takes writes: B keeps
// serving, and every write A acknowledged is there.
func (rp *replicaPair) killA(t *testing.T, token string) {
	a, b := rp.a, rp.b
	l := startLoad("http://"+a.adminAddr, "killed")
	within(t, "writes acknowledged by A", time.Now(), 30*time.Second, func() bool { return l.count(201) >= 10 })
	a.kill()
	l.end()
	for range 20 {
		if r := do(t, "GET", b.gateway+"/fhir/R4/Patient/1", "", "", bearer(token)...); r.status != 200 {
			t.Fatalf("B after A was killed: %d %s", r.status, r.body)
		}
	}
	if r := do(t, "POST", "http://"+b.adminAddr+"/fhirgate/User", "application/json", `{"email":"after-kill@example.com"}`); r.status != 201 {
		t.Fatalf("a write on B after A was killed: %d %s", r.status, r.body)
	}
	l.checkStored(t, b)
	t.Logf("kill -9: A acknowledged %d writes before it died, all on B", len(l.acked))
}

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The identity provider fault suite: a fake provider that the test switches
// between healthy and every way a provider fails, in front of a gateway
// with `userinfo_timeout 500ms`. Each failing exchange must answer the
// documented status (503 + Retry-After, or 429 + Retry-After) within the
// timeout plus a margin, and the same subject token must exchange as soon
// as the provider is healthy again (failures are never cached).

const (
	idpTimeout = 500 * time.Millisecond
	// idpBound is the longest an exchange may take whatever the provider
	// does: the configured timeout plus a margin for a loaded machine.
	idpBound = idpTimeout + 1500*time.Millisecond
)

const idpFaultsCaddyfile = `{
	admin localhost:{{.Admin}}
	skip_install_trust
	fhirgate {
		storage_dir ./data
		issuer http://localhost:{{.Gateway}}
		userinfo_timeout 500ms
		project alpha {
			client alpha-app {
				userinfo_url {{.IdP}}/userinfo
			}
			user alice@example.com {
				profile Practitioner/alice
			}
		}
	}
}

http://localhost:{{.Gateway}} {
	fhirgate {
		fhir_base /fhir/R4
	}
	respond "backend" 200
}
`

// aliceUserinfo is the healthy provider's answer for every "tok-…" token.
const aliceUserinfo = `{"sub":"sub-alice","email":"alice@example.com","email_verified":true}`

// fakeIdP is a userinfo endpoint whose behaviour the test switches.
type fakeIdP struct {
	*faultServer
	mode  atomic.Pointer[http.HandlerFunc]
	calls atomic.Int64
}

func newFakeIdP(t *testing.T) *fakeIdP {
	idp := &fakeIdP{}
	idp.faultServer = newFaultServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		idp.calls.Add(1)
		(*idp.mode.Load())(w, r)
	}))
	idp.set(idpHealthy)
	return idp
}

func (idp *fakeIdP) set(h http.HandlerFunc) { idp.mode.Store(&h) }

// idpHealthy knows every token starting with "tok-" as alice's.
func idpHealthy(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer tok-") {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, aliceUserinfo)
}

func idpStatus(status int, retryAfter string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"error":"nope"}`)
	}
}

func idpBody(contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		_, _ = io.WriteString(w, body)
	}
}

// hugeUserinfo is a valid userinfo document of about 2 MB: only its size
// is wrong.
var hugeUserinfo = `{"sub":"sub-alice","email":"alice@example.com","email_verified":true,"padding":"` +
	strings.Repeat("x", 2<<20) + `"}`

// idpFailure is one way the provider fails and what the client must get.
type idpFailure struct {
	name string
	// mode is the provider's behaviour; nil with down set.
	mode func(idp *fakeIdP) http.HandlerFunc
	// down closes the provider's listener for the case (connection
	// refused) and reopens it afterwards.
	down bool
	// status is the documented answer: 503 or 429.
	status int
	// retryAfter is the exact Retry-After expected; "" accepts any positive
	// number of seconds.
	retryAfter string
	// waits marks failures only the timeout can end: they must take at
	// least the timeout (else the case did not test what it says). The
	// others must not wait for it.
	waits bool
}

var idpFailures = []idpFailure{
	{name: "down (connection refused)", down: true, status: 503},
	{name: "refusing (TCP reset)", status: 503, mode: func(*fakeIdP) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { resetConn(w) }
	}},
	{name: "hanging (never answers)", status: 503, waits: true, mode: func(idp *fakeIdP) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { idp.waitOrStop(r) }
	}},
	{name: "slow past the timeout (answers after 1s)", status: 503, waits: true, mode: func(idp *fakeIdP) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(2 * idpTimeout):
				idpHealthy(w, r)
			case <-idp.stop:
			}
		}
	}},
	{name: "headers then a body that never ends", status: 503, waits: true, mode: func(idp *fakeIdP) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"sub":"sub-alice",`)
			_ = http.NewResponseController(w).Flush()
			idp.waitOrStop(r)
		}
	}},
	{name: "500", status: 503, mode: func(*fakeIdP) http.HandlerFunc { return idpStatus(500, "") }},
	{name: "500 with Retry-After 30", status: 503, retryAfter: "30", mode: func(*fakeIdP) http.HandlerFunc { return idpStatus(500, "30") }},
	{name: "502", status: 503, mode: func(*fakeIdP) http.HandlerFunc { return idpStatus(502, "") }},
	{name: "503", status: 503, mode: func(*fakeIdP) http.HandlerFunc { return idpStatus(503, "") }},
	{name: "504", status: 503, mode: func(*fakeIdP) http.HandlerFunc { return idpStatus(504, "") }},
	{name: "429 with Retry-After 7", status: 429, retryAfter: "7", mode: func(*fakeIdP) http.HandlerFunc { return idpStatus(429, "7") }},
	{name: "429 without Retry-After", status: 429, mode: func(*fakeIdP) http.HandlerFunc { return idpStatus(429, "") }},
	{name: "HTML page", status: 503, mode: func(*fakeIdP) http.HandlerFunc {
		return idpBody("text/html; charset=utf-8", "<!doctype html><html><body><h1>Maintenance</h1></body></html>")
	}},
	{name: "garbage JSON", status: 503, mode: func(*fakeIdP) http.HandlerFunc { return idpBody("application/json", `{"sub":`) }},
	{name: "empty 200", status: 503, mode: func(*fakeIdP) http.HandlerFunc { return idpBody("application/json", "") }},
	{name: "huge (2 MB, Content-Length)", status: 503, mode: func(*fakeIdP) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(hugeUserinfo)))
			_, _ = io.WriteString(w, hugeUserinfo)
		}
	}},
	{name: "huge (2 MB, chunked)", status: 503, mode: func(*fakeIdP) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			rc := http.NewResponseController(w)
			for i := 0; i < len(hugeUserinfo); i += 64 << 10 {
				if _, err := io.WriteString(w, hugeUserinfo[i:min(i+64<<10, len(hugeUserinfo))]); err != nil {
					return
				}
				_ = rc.Flush()
			}
		}
	}},
	{name: "redirect to another host", status: 503, mode: func(idp *fakeIdP) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.2:1/userinfo", http.StatusFound)
		}
	}},
}

// TestFaultIdentityProvider runs every provider failure against one
// gateway, each followed by recovery with the same subject token. Under
// FHIRGATE_SOAK the table repeats until the soak time is up.
func TestFaultIdentityProvider(t *testing.T) {
	idp := newFakeIdP(t)
	s := startStackFrom(t, idpFaultsCaddyfile, faultConfig{stackConfig: stackConfig{IdP: idp.URL()}})

	// A token exchanged while the provider is healthy is served from the
	// userinfo cache during an outage: the cache is what keeps signed-in
	// users working, so check it before the failures.
	if r, _, err := s.exchange("alpha-app", "tok-cached"); err != nil || r.status != 200 {
		t.Fatalf("healthy exchange: %v %d %s", err, r.status, r.body)
	}

	deadline := time.Now().Add(soakDuration(t, 0, 3*time.Minute))
	for round := 0; round == 0 || time.Now().Before(deadline); round++ {
		for _, tc := range idpFailures {
			t.Run(tc.name, func(t *testing.T) {
				token := fmt.Sprintf("tok-%d-%s", round, strings.NewReplacer(" ", "-", "(", "", ")", "", ",", "").Replace(tc.name))
				calls := idp.calls.Load()
				if tc.down {
					idp.down()
				} else {
					idp.set(tc.mode(idp))
				}
				r, took, err := s.exchange("alpha-app", token)
				if tc.down {
					if cached, _, err := s.exchange("alpha-app", "tok-cached"); round == 0 && (err != nil || cached.status != 200) {
						t.Errorf("a cached sign-in during the outage: %v %d %s", err, cached.status, cached.body)
					}
					idp.up()
				} else {
					if idp.calls.Load() == calls {
						t.Errorf("the provider was never called: the case tested nothing")
					}
					idp.set(idpHealthy)
				}
				if err != nil {
					t.Fatalf("exchange: %v (after %v)", err, took)
				}
				t.Logf("%d in %v, Retry-After %q", r.status, took.Round(time.Millisecond), r.header.Get("Retry-After"))
				checkIdPFailure(t, tc, r, took, token)

				// Recovery: the very next exchange with the same token works;
				// nothing of the failure was kept.
				r, took, err = s.exchange("alpha-app", token)
				if err != nil || r.status != 200 || jsonField(r.body, "access_token") == "" {
					t.Fatalf("exchange after the provider recovered: %v %d %s (after %v)", err, r.status, r.body, took)
				}
			})
		}
	}

	t.Run("hanging provider, 8 exchanges at once, gateway keeps serving", func(t *testing.T) {
		idp.set(func(w http.ResponseWriter, r *http.Request) { idp.waitOrStop(r) })
		defer idp.set(idpHealthy)
		type result struct {
			r    response
			took time.Duration
			err  error
		}
		results := make([]result, 8)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				r, took, err := s.exchange("alpha-app", fmt.Sprintf("tok-parallel-hang-%d", i))
				results[i] = result{r, took, err}
			})
		}
		// Meanwhile everything that does not need the provider answers at once.
		start := time.Now()
		r, err := try("GET", s.gateway+"/.well-known/jwks.json", "", "")
		if err != nil || r.status != 200 {
			t.Errorf("JWKS while the provider hangs: %v %d", err, r.status)
		} else if d := time.Since(start); d > idpTimeout {
			t.Errorf("JWKS took %v while the provider hangs", d)
		}
		wg.Wait()
		for i, res := range results {
			if res.err != nil {
				t.Fatalf("exchange %d: %v", i, res.err)
			}
			checkIdPFailure(t, idpFailure{status: 503, waits: true}, res.r, res.took, fmt.Sprintf("tok-parallel-hang-%d", i))
		}
	})
}

// checkIdPFailure asserts the documented answer to a provider failure.
func checkIdPFailure(t *testing.T, tc idpFailure, r response, took time.Duration, token string) {
	t.Helper()
	if r.status != tc.status {
		t.Errorf("status %d, want %d: %s", r.status, tc.status, r.body)
	}
	if got := jsonField(r.body, "error"); got != "temporarily_unavailable" {
		t.Errorf("error %q, want temporarily_unavailable: %s", got, r.body)
	}
	ra := r.header.Get("Retry-After")
	if n, err := strconv.Atoi(ra); err != nil || n < 1 || n > 3600 {
		t.Errorf("Retry-After %q, want seconds in [1, 3600]", ra)
	}
	if tc.retryAfter != "" && ra != tc.retryAfter {
		t.Errorf("Retry-After %q, want the provider's %q", ra, tc.retryAfter)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", cc)
	}
	if strings.Contains(string(r.body), token) {
		t.Errorf("the error body carries the subject token: %s", r.body)
	}
	if took > idpBound {
		t.Errorf("took %v, longer than the %v timeout plus margin (%v)", took, idpTimeout, idpBound)
	}
	if tc.waits && took < idpTimeout {
		t.Errorf("took %v, less than the %v timeout: the provider's stall was not what ended it", took, idpTimeout)
	}
	if !tc.waits && took >= idpTimeout {
		t.Errorf("took %v: a failure the provider reports at once must not wait out the %v timeout", took, idpTimeout)
	}
}

// TestFaultIdentityProviderFlapping alternates the provider between a good
// answer and a 500 on every call: each exchange gets what its own provider
// call got (200, or 503 + Retry-After), nothing is mixed up between
// concurrent exchanges, and nothing from a failure is reused. Under
// FHIRGATE_SOAK it runs with concurrent clients for the soak time.
func TestFaultIdentityProviderFlapping(t *testing.T) {
	idp := newFakeIdP(t)
	s := startStackFrom(t, idpFaultsCaddyfile, faultConfig{stackConfig: stackConfig{IdP: idp.URL()}})

	// answered records, per subject token, whether the provider answered
	// it well: every exchange below uses a fresh token.
	var mu sync.Mutex
	answered := map[string]bool{}
	var n atomic.Int64
	idp.set(func(w http.ResponseWriter, r *http.Request) {
		good := n.Add(1)%2 == 1
		mu.Lock()
		answered[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")] = good
		mu.Unlock()
		if good {
			idpHealthy(w, r)
			return
		}
		idpStatus(500, "")(w, r)
	})
	// check says what is wrong with an exchange's answer, "" if nothing.
	check := func(token string, r response, took time.Duration) string {
		mu.Lock()
		good, called := answered[token]
		mu.Unlock()
		switch {
		case !called:
			return "the provider was never asked"
		case took > idpBound:
			return fmt.Sprintf("took %v, bound %v", took, idpBound)
		case good && r.status == 200 && jsonField(r.body, "access_token") != "":
			return ""
		case good && r.status == 503 && took >= idpTimeout:
			return "" // answered well, but too late on a loaded machine
		case !good && r.status == 503 && r.header.Get("Retry-After") != "":
			return ""
		}
		return fmt.Sprintf("provider answered well: %v; gateway: %d %s (after %v)", good, r.status, r.body, took)
	}

	t.Run("sequential", func(t *testing.T) {
		var statuses []int
		for i := range 20 {
			token := fmt.Sprintf("tok-flap-seq-%d", i)
			r, took, err := s.exchange("alpha-app", token)
			if err != nil {
				t.Fatal(err)
			}
			if problem := check(token, r, took); problem != "" {
				t.Errorf("exchange %d: %s", i, problem)
			}
			statuses = append(statuses, r.status)
		}
		t.Logf("statuses %v", statuses)
	})

	t.Run("concurrent", func(t *testing.T) {
		var ok, unavailable atomic.Int64
		var slowest atomic.Int64
		var pmu sync.Mutex
		var problems []string
		until := time.Now().Add(soakDuration(t, 2*time.Second, 3*time.Minute))
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := 0; time.Now().Before(until); i++ {
					token := fmt.Sprintf("tok-flap-%d-%d", w, i)
					r, took, err := s.exchange("alpha-app", token)
					if took > time.Duration(slowest.Load()) {
						slowest.Store(int64(took))
					}
					problem := ""
					if err != nil {
						problem = err.Error()
					} else {
						problem = check(token, r, took)
					}
					if problem != "" {
						pmu.Lock()
						problems = append(problems, problem)
						pmu.Unlock()
						continue
					}
					if r.status == 200 {
						ok.Add(1)
					} else {
						unavailable.Add(1)
					}
				}
			})
		}
		wg.Wait()
		t.Logf("%d ok, %d unavailable, slowest %v", ok.Load(), unavailable.Load(), time.Duration(slowest.Load()).Round(time.Millisecond))
		if len(problems) > 0 {
			t.Fatalf("%d wrong answers, first: %s", len(problems), problems[0])
		}
		if ok.Load() == 0 || unavailable.Load() == 0 {
			t.Fatalf("flapping produced %d ok and %d unavailable: both must occur", ok.Load(), unavailable.Load())
		}
	})

	t.Run("recovers", func(t *testing.T) {
		idp.set(idpHealthy)
		for i := range 5 {
			if r, _, err := s.exchange("alpha-app", fmt.Sprintf("tok-flap-after-%d", i)); err != nil || r.status != 200 {
				t.Fatalf("exchange %d after flapping stopped: %v %d %s", i, err, r.status, r.body)
			}
		}
	})
}

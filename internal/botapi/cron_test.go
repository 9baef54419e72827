package botapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/kvqueue"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// cronBot logs what a scheduled run sees: its input (the Bot), content
// type, requester and tick.
const cronBot = `exports.handler = async (medplum, event) => {
	console.log('run ' + event.input.resourceType + '/' + event.input.name + ' ' + event.contentType + ' ' +
		event.requester.reference + ' tick=' + event.headers['x-fhirgate-cron-tick']);
	return 'ok';
};`

// tickCounter counts CronOptions.OnTick results.
type tickCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *tickCounter) add(result string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[result]++
}

func (c *tickCounter) get(result string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[result]
}

// wait waits until result has been counted n times.
func (c *tickCounter) wait(t *testing.T, result string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for c.get(result) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d %q ticks after a minute, want %d (all: %v)", c.get(result), result, n, c.n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fastCron makes every scan, a second apart, cover a minute of cron time
// (from 2026-01-01T00:00Z at start), so a "* * * * *" bot ticks at each.
func fastCron(start time.Time, counter *tickCounter, api *API) CronOptions {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return CronOptions{
		API:       func() (*API, error) { return api, nil },
		ScanEvery: time.Second,
		Clock:     func(t time.Time) time.Time { return base.Add(t.Sub(start) / time.Second * time.Minute) },
		OnTick:    counter.add,
	}
}

func stopQueue(t *testing.T, q queue.Queue) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = q.Stop(ctx)
	})
}

// ticksRun returns the ticks in the bot's AuditEvents' console output, as
// the tick header showed them; call it after the APIs are shut down.
func ticksRun(t *testing.T, st *store.Store, botID, wantLine string) []string {
	t.Helper()
	evs, err := store.Search[store.AuditEvent](context.Background(), st, store.Filter{Bot: botID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var ticks []string
	for _, ev := range evs {
		if !strings.Contains(ev.OutcomeDesc, wantLine) {
			t.Fatalf("run's console %q, want %q", ev.OutcomeDesc, wantLine)
		}
		_, tick, _ := strings.Cut(strings.TrimSpace(ev.OutcomeDesc), "tick=")
		ticks = append(ticks, tick)
	}
	return ticks
}

// TestCronTicksAreEnqueuedOnceAndRunAsTheBot, on real Badger and goja with
// scans called at chosen times: a due tick is enqueued once however often
// it is scanned, and runs the bot as itself with the Bot as input and the
// tick in its headers; a changed schedule, a deleted bot and a redeploy
// count at the tick's run.
func TestCronTicksAreEnqueuedOnceAndRunAsTheBot(t *testing.T) {
	f := newAPIFixture(t, Options{})
	q := kvqueue.New(f.st.KV(), queue.Options{PollInterval: 50 * time.Millisecond}, nil)
	counter := &tickCounter{}
	var running atomic.Pointer[API] // the API of the running config, when there is one
	c, err := RegisterCron(q, f.st, CronOptions{OnTick: counter.add, API: func() (*API, error) {
		if api := running.Load(); api != nil {
			return api, nil
		}
		return nil, errors.New("no configuration is running")
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Leap days only, so the real-time scans of the running queue find
	// nothing due.
	bot := f.deployBot(t, &store.Bot{Name: "leap", CronString: "30 2 29 2 *"}, cronBot)
	f.deployBot(t, &store.Bot{Name: "unscheduled"}, cronBot)
	tick := time.Date(2028, 2, 29, 2, 30, 0, 0, time.UTC)
	if err := c.runTick(ctx, cronTickArgs{Bot: bot.ID, Tick: tick}); !errors.Is(err, errNoAPI) {
		t.Fatalf("a tick while no config runs: %v, want errNoAPI (retried)", err)
	}
	running.Store(f.api)

	for _, scan := range []time.Time{tick, tick, tick.Add(30 * time.Second)} {
		n, err := c.Scan(ctx, scan)
		if err != nil || n != 0 && scan != tick {
			t.Fatalf("scan at %s: %d, %v", scan, n, err)
		}
	}
	if n, _ := c.Scan(ctx, tick.Add(-time.Minute)); n != 0 {
		t.Fatalf("a scan before the tick enqueued %d", n)
	}
	if counter.get("enqueued") != 1 {
		t.Fatalf("enqueued %d times, want once", counter.get("enqueued"))
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopQueue(t, q)
	counter.wait(t, "run", 1)

	// A changed schedule: the old tick no longer runs.
	if bot, err = store.Get[store.Bot](ctx, f.st, bot.ID); err != nil {
		t.Fatal(err)
	}
	bot.CronString = "45 2 29 2 *"
	if _, err := f.st.Put(ctx, bot, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.runTick(ctx, cronTickArgs{Bot: bot.ID, Tick: tick}); err != nil || counter.get("skipped") != 1 {
		t.Fatalf("a tick of the old schedule: %v, skipped %d", err, counter.get("skipped"))
	}
	// A redeploy: the next tick runs the new code.
	body, _ := json.Marshal(map[string]string{"code": strings.Replace(cronBot, "'run '", "'run2 '", 1), "filename": "index.js"})
	if r := f.call(t, f.admin, http.MethodPost, "/fhir/R4/Bot/"+bot.ID+"/$deploy", string(body)); r.status != http.StatusOK {
		t.Fatalf("redeploy: %d %s", r.status, r.body)
	}
	next := time.Date(2032, 2, 29, 2, 45, 0, 0, time.UTC)
	if err := c.runTick(ctx, cronTickArgs{Bot: bot.ID, Tick: next}); err != nil || counter.get("run") != 2 {
		t.Fatalf("a tick after the redeploy: %v, run %d", err, counter.get("run"))
	}
	f.api.Shutdown()
	evs, err := store.Search[store.AuditEvent](ctx, f.st, store.Filter{Bot: bot.ID})
	if err != nil || len(evs) != 2 {
		t.Fatalf("%d AuditEvents, %v; want 2", len(evs), err)
	}
	want := []string{ // newest first
		"run2 Bot/leap application/fhir+json Bot/" + bot.ID + " tick=2032-02-29T02:45:00Z",
		"run Bot/leap application/fhir+json Bot/" + bot.ID + " tick=2028-02-29T02:30:00Z",
	}
	for i, ev := range evs {
		if strings.TrimSpace(ev.OutcomeDesc) != want[i] {
			t.Fatalf("run %d console %q, want %q", i, ev.OutcomeDesc, want[i])
		}
	}
	if err := f.st.Delete(ctx, "Bot", bot.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.runTick(ctx, cronTickArgs{Bot: bot.ID, Tick: next}); err != nil || counter.get("skipped") != 2 {
		t.Fatalf("a deleted bot's tick: %v, skipped %d", err, counter.get("skipped"))
	}
}

// TestCronPeriodicScanRunsEachTick: the periodic scan of the queue, its
// clock quickened (a cron minute a second), runs a "* * * * *" bot at
// successive ticks, each once.
func TestCronPeriodicScanRunsEachTick(t *testing.T) {
	f := newAPIFixture(t, Options{})
	q := kvqueue.New(f.st.KV(), queue.Options{PollInterval: 50 * time.Millisecond}, nil)
	counter := &tickCounter{}
	if _, err := RegisterCron(q, f.st, fastCron(time.Now().Truncate(time.Second), counter, f.api)); err != nil {
		t.Fatal(err)
	}
	bot := f.deployBot(t, &store.Bot{Name: "minutely", CronString: "* * * * *"}, cronBot)
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopQueue(t, q)
	counter.wait(t, "run", 3)
	f.api.Shutdown()
	checkTicksOnce(t, ticksRun(t, f.st, bot.ID, "run Bot/minutely application/fhir+json Bot/"+bot.ID))
}

// checkTicksOnce checks that no tick ran twice and that there were at
// least three, whole cron minutes.
func checkTicksOnce(t *testing.T, ticks []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, tick := range ticks {
		at, err := time.Parse(time.RFC3339, tick)
		if err != nil || at.Second() != 0 {
			t.Fatalf("tick %q is not a whole minute", tick)
		}
		if seen[tick] {
			t.Fatalf("tick %s ran twice: %v", tick, ticks)
		}
		seen[tick] = true
	}
	if len(seen) < 3 {
		t.Fatalf("%d ticks ran, want at least 3", len(seen))
	}
}

// TestCronTwoReplicasOnPostgresRunEachTickOnce: two replicas share a
// PostgreSQL store and River queue, each with the cron registered and a
// bot API attached; every tick of a "* * * * *" bot runs once in all.
func TestCronTwoReplicasOnPostgresRunEachTickOnce(t *testing.T) {
	dsn := pgkvtest.DSN(t)
	start := time.Now().Truncate(time.Second)
	counter := &tickCounter{}
	a, b := openReplica(t, dsn), openReplica(t, dsn)
	f := newAPIFixtureOn(t, a.st, Options{Queue: a.q})
	bBackend := &apiFixture{}
	bSrv := httptest.NewServer(http.HandlerFunc(bBackend.serveBackend))
	t.Cleanup(bSrv.Close)
	apiB := replicaAPI(t, b, bSrv.URL)
	for _, r := range []struct {
		rep *replica
		api *API
	}{{a, f.api}, {b, apiB}} {
		if _, err := RegisterCron(r.rep.q, r.rep.st, fastCron(start, counter, r.api)); err != nil {
			t.Fatal(err)
		}
		r.rep.runJobs(t, r.api)
	}
	bot := f.deployBot(t, &store.Bot{Name: "minutely", CronString: "* * * * *"}, cronBot)
	counter.wait(t, "run", 4)
	f.api.Shutdown()
	apiB.Shutdown()
	ticks := ticksRun(t, a.st, bot.ID, "run Bot/minutely application/fhir+json Bot/"+bot.ID)
	checkTicksOnce(t, ticks)
	if enq := counter.get("enqueued"); enq < len(ticks) {
		t.Fatalf("%d ticks enqueued, %d run", enq, len(ticks))
	}
}

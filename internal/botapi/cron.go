package botapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
)

// Scheduled bots (Bot.cronString, Bot.cronTiming) run through the queue in
// two steps. A periodic scan, once per cluster every CronOptions.ScanEvery,
// lists the bots with a schedule and enqueues one job per bot and cron
// tick falling in the minute it covers, unique per bot and tick; the tick
// job then reads the bot again and runs it (RunMessage) as itself, with
// the Bot as event.input, as Medplum does. So each tick is enqueued once
// per cluster and run at least once, a changed schedule or a redeploy
// counts from the next scan, and ticks that fell while no process ran are
// not replayed (no scan covered them).

// Job kinds of scheduled bots.
const (
	CronScanKind = "bot.cron_scan"
	CronTickKind = "bot.cron_tick"
)

// CronTickHeader carries the tick a scheduled run is for (RFC 3339, UTC):
// the bot reads it as event.headers["x-fhirgate-cron-tick"].
const CronTickHeader = "X-Fhirgate-Cron-Tick"

// DefaultCronScanEvery is how often scheduled bots are looked for; cron's
// finest tick is a minute.
const DefaultCronScanEvery = time.Minute

// cronTickTimeout bounds one tick job: the longest bot run (MaxBotTimeout)
// with room to wait for a runner slot.
const cronTickTimeout = time.Duration(store.MaxBotTimeout)*time.Second + time.Minute

// errNoAPI retries a tick that came while this process had no bot API (a
// config without bots, or between two configs).
var errNoAPI = errors.New("no bot API in this process to run the scheduled bot")

// CronOptions configures scheduled bots. API is required; the zero value
// of the rest is the default.
type CronOptions struct {
	// API returns the bot API a tick runs on, in this process, when the
	// tick runs: the running configuration's (whose request-less backend
	// route the bot's medplum calls take). An error retries the tick.
	API func() (*API, error)
	// ScanEvery is how often the scan runs; 0 means DefaultCronScanEvery.
	ScanEvery time.Duration
	// Clock maps a scan's tick to the cron time it covers up to; nil is
	// the tick itself. Tests use it to pass cron minutes faster.
	Clock func(scanTick time.Time) time.Time
	// OnTick is told what became of each tick: "enqueued" by a scan, then
	// "run", "skipped" (the bot, its schedule or its code is gone or
	// changed) or "failed" (not run; retried while attempts last).
	OnTick func(result string)
	Logger *zap.Logger
}

// Cron runs the scheduled bots of one store's queue. The queue outlives
// configurations; each tick runs on the API that CronOptions.API names
// when it runs.
type Cron struct {
	st *store.Store
	q  queue.Queue
	o  CronOptions
}

// RegisterCron registers the scan and tick kinds, and the periodic scan,
// on q. Call it before q starts.
func RegisterCron(q queue.Queue, st *store.Store, o CronOptions) (*Cron, error) {
	if o.API == nil {
		return nil, errors.New("botapi: CronOptions.API is required")
	}
	if o.ScanEvery <= 0 {
		o.ScanEvery = DefaultCronScanEvery
	}
	if o.Clock == nil {
		o.Clock = func(t time.Time) time.Time { return t }
	}
	if o.OnTick == nil {
		o.OnTick = func(string) {}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	c := &Cron{st: st, q: q, o: o}
	if err := q.Register(CronScanKind, c.scanJob, queue.KindOptions{MaxAttempts: 3, Timeout: o.ScanEvery}); err != nil {
		return nil, err
	}
	if err := q.Register(CronTickKind, c.tickJob, queue.KindOptions{MaxAttempts: 3, Timeout: cronTickTimeout}); err != nil {
		return nil, err
	}
	if err := q.AddPeriodic(queue.Periodic{Kind: CronScanKind, Every: o.ScanEvery}); err != nil {
		return nil, err
	}
	return c, nil
}

// cronTickArgs is a tick job's payload.
type cronTickArgs struct {
	Bot  string    `json:"bot"`
	Tick time.Time `json:"tick"`
}

func (c *Cron) scanJob(ctx context.Context, d *queue.Delivery) error {
	tick, ok := queue.ParseTickKey(d.UniqueKey)
	if !ok {
		return nil // not a periodic tick: nothing to cover
	}
	_, err := c.Scan(ctx, tick)
	return err
}

// Scan enqueues a tick job for every scheduled bot and cron tick in the
// span the scan at scanTick covers: after the previous scan's cron time,
// up to and including its own. It returns how many were new.
func (c *Cron) Scan(ctx context.Context, scanTick time.Time) (int, error) {
	from, to := c.o.Clock(scanTick.Add(-c.o.ScanEvery)), c.o.Clock(scanTick)
	bots, err := c.st.ScheduledBots(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, bot := range bots {
		sched, err := bot.Schedule()
		if err != nil || sched == nil {
			continue // stored before it was checked; a write of the bot says why
		}
		// Bounded: cron's ticks are at least a minute apart.
		for t := sched.Next(from); !t.After(to) && !t.IsZero(); t = sched.Next(t) {
			args, _ := json.Marshal(cronTickArgs{Bot: bot.ID, Tick: t.UTC()}) // plain fields: cannot fail
			res, err := c.q.Enqueue(ctx, queue.Job{Kind: CronTickKind, Args: args, UniqueKey: bot.ID + "@" + t.UTC().Format(time.RFC3339)})
			if err != nil {
				return n, fmt.Errorf("enqueuing Bot/%s's tick %s: %w", bot.ID, t.UTC().Format(time.RFC3339), err)
			}
			if !res.Duplicate {
				n++
				c.o.OnTick("enqueued")
			}
		}
	}
	return n, nil
}

func (c *Cron) tickJob(ctx context.Context, d *queue.Delivery) error {
	var a cronTickArgs
	if err := json.Unmarshal(d.Args, &a); err != nil || a.Bot == "" {
		return nil // not a tick: nothing to retry
	}
	err := c.runTick(ctx, a)
	if err != nil {
		c.o.OnTick("failed")
	}
	return err
}

// runTick runs the bot for tick a, unless the bot is gone or its schedule
// no longer has that tick.
func (c *Cron) runTick(ctx context.Context, a cronTickArgs) error {
	tick := a.Tick.Format(time.RFC3339)
	log := c.o.Logger.With(zap.String("bot", a.Bot), zap.String("tick", tick))
	bot, err := store.Get[store.Bot](ctx, c.st, a.Bot)
	if errors.Is(err, store.ErrNotFound) {
		c.o.OnTick("skipped")
		return nil
	}
	if err != nil {
		return err
	}
	sched, err := bot.Schedule()
	if err != nil || sched == nil || !sched.Next(a.Tick.Add(-time.Second)).Equal(a.Tick) {
		c.o.OnTick("skipped") // its schedule changed since the scan
		return nil
	}
	api, err := c.o.API()
	if err != nil {
		return fmt.Errorf("%w: %v", errNoAPI, err)
	}
	body, err := json.Marshal(bot)
	if err != nil {
		return err
	}
	res, err := api.RunMessage(ctx, Message{
		Project:     bot.Meta.Project,
		Bot:         "Bot/" + bot.ID,
		ContentType: "application/fhir+json",
		Body:        body,
		Header:      http.Header{CronTickHeader: {tick}},
		TraceID:     uuid.NewString(),
	})
	if ferr := fhir.AsError(err); ferr != nil {
		if ferr.Status == http.StatusTooManyRequests || ferr.Status >= 500 {
			return err // busy or failing here: another attempt may run it
		}
		log.Warn("scheduled bot not run", zap.Int("status", ferr.Status), zap.String("reason", ferr.Message))
		c.o.OnTick("skipped")
		return nil
	}
	if err != nil {
		return err
	}
	if res.Outcome.String() != "success" {
		// Its AuditEvent has the details; the message may carry what the bot handled.
		log.Info("scheduled bot run failed", zap.String("outcome", res.Outcome.String()))
	}
	c.o.OnTick("run")
	return nil
}

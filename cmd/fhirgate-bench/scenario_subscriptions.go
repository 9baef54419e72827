package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// subscriptionsScenarioID numbers the Subscription engine scenario.
const subscriptionsScenarioID = 12

// The workload of issue 24's target: a fixed rate of proxied creates, and
// that many bot Subscriptions matching each of them.
const (
	subscriptionRate  = 200
	subscriptionCount = 5
	// subscriberBot is the bot the Subscriptions run: as cheap as a bot
	// gets, so what is measured is the engine, not the bot.
	subscriberBot     = "subscriber"
	subscriberBotCode = "export async function handler(medplum, event) {\n  return event.input.id;\n}\n"
	// subscriptionDrain bounds the wait for a segment's deliveries.
	subscriptionDrain = 2 * time.Minute
)

// subscriptionsScenario is scenario 12: POST Patient through the gate at a
// fixed rate, with no Subscription and with subscriptionCount active
// Subscriptions whose endpoint is a bot, alternating in segments, on a
// gateway whose store is on Badger and on one on PostgreSQL (a database
// created for the run and dropped after). The write latency is the
// client's (from when each request was due); the trigger lag is fhirgate's
// histogram, from the write's answer to the delivery's start.
func (h *harness) subscriptionsScenario(ctx context.Context, _ *mainInstance) (*scenario, error) {
	s := &scenario{ID: subscriptionsScenarioID, Short: "Subscriptions",
		Title: fmt.Sprintf("POST Patient at %d/s through the gate, %d bot Subscriptions matching each vs none", subscriptionRate, subscriptionCount)}
	stores := []struct{ label, name string }{{"Badger", "subs-badger"}, {"PG", "subs-postgres"}}
	for _, st := range stores {
		dsn := ""
		if st.label == "PG" {
			var drop func()
			var err error
			dsn, drop, err = benchDatabase(ctx, h.nonce+"_subs")
			if err != nil {
				h.logf("scenario %d on PostgreSQL unavailable: %v", subscriptionsScenarioID, err)
				s.Measurements = append(s.Measurements, &measurement{Label: "PostgreSQL", Name: "gateway on PostgreSQL", Unavailable: err.Error()})
				s.Checks = append(s.Checks,
					unavailableCheck("client write p99 with Subscriptions ÷ none, PostgreSQL", "<=", 1.2, "", err.Error()),
					unavailableCheck("trigger lag p99, PostgreSQL", "<=", 1000, "ms", err.Error()),
					unavailableCheck("client write p99 beside the deliveries' CPU spent in another process ÷ none, PostgreSQL", "<=", 1.2, "", err.Error()))
				continue
			}
			defer drop()
		}
		p, err := h.startInstanceOn(ctx, st.name, 0, 0, 2, false, dsn, withSubscriber)
		if err != nil {
			return s, err
		}
		err = h.subscriptionsOn(ctx, s, p, st.label)
		p.stop()
		if err != nil {
			return s, err
		}
	}
	return s, nil
}

// withSubscriber turns subscriptions on and declares the subscriber bot.
func withSubscriber(cfg *caddyConfig, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	cfg.subscriberBotSource = filepath.Join(dir, subscriberBot+".js")
	if err := os.WriteFile(cfg.subscriberBotSource, []byte(subscriberBotCode), 0o600); err != nil {
		return fmt.Errorf("writing the subscriber bot: %w", err)
	}
	return nil
}

// subscriptionsOn measures one gateway and adds its rows to s.
func (h *harness) subscriptionsOn(ctx context.Context, s *scenario, p *caddyProc, store string) error {
	long := map[string]string{"Badger": "Badger", "PG": "PostgreSQL"}[store]
	admin, err := exchange(ctx, p.sites.gateway, h.userToken(0, "subs-admin-"+store))
	if err != nil {
		return err
	}
	writer, err := exchange(ctx, p.sites.gateway, h.userToken(1, "subs-writer-"+store))
	if err != nil {
		return err
	}
	botID, err := p.botID(ctx, botSystem+"|"+subscriberBot)
	if err != nil {
		return err
	}
	write := requestSpec{
		Method: http.MethodPost, URL: "http://" + p.sites.gateway + "/fhir/R4/Patient",
		Header: map[string]string{"Authorization": "Bearer " + writer, "Content-Type": "application/fhir+json"},
		Body:   `{"resourceType":"Patient","name":[{"family":"Bench","given":["W{seq}"]}]}`,
	}
	if status, body, err := send(ctx, write); err != nil || status != http.StatusCreated {
		return fmt.Errorf("probing POST Patient on %s: HTTP %d %v: %s", long, status, err, oneLine(body, 200))
	}
	spec := h.spec(h.set.Concurrency, write)
	spec.Rate = subscriptionRate
	order := comparisonOrder(h.set.Rounds)
	spec.Duration = duration(time.Duration(spec.Duration) * 2 / time.Duration(len(order)))
	sides := [2]string{"none", fmt.Sprintf("%d subs", subscriptionCount)}
	var parts [2][]*loadResult
	var got subscriptionMetrics
	var subs []string
	defer func() { deleteSubscriptions(context.WithoutCancel(ctx), p, admin, subs) }()
	for k, side := range order {
		if side == 1 && subs == nil {
			if subs, err = createSubscriptions(ctx, p, admin, botID); err != nil {
				return err
			}
		}
		if side == 0 && subs != nil {
			if err := deleteSubscriptions(ctx, p, admin, subs); err != nil {
				return err
			}
			subs = nil
		}
		before, err := p.subscriptionMetrics(ctx)
		if err != nil {
			return err
		}
		r, err := h.load(ctx, p, fmt.Sprintf("12-%s-%s-%d", strings.ReplaceAll(sides[side], " ", ""), store, k/2+1), spec)
		if err != nil {
			return err
		}
		parts[side] = append(parts[side], r)
		if side == 1 {
			d, err := h.drainSubscriptions(ctx, p, before)
			if err != nil {
				return fmt.Errorf("%s: %w", long, err)
			}
			got = got.add(d)
		}
	}
	var res [2]*loadResult
	for i := range res {
		if res[i], err = mergeResults(parts[i]...); err != nil {
			return err
		}
	}
	if subs != nil {
		if err := deleteSubscriptions(ctx, p, admin, subs); err != nil {
			return err
		}
		subs = nil
	}
	control, err := h.deliveriesCPUControl(ctx, p, store, long, spec, order, res)
	if err != nil {
		return err
	}
	p50, _, _ := got.lagQuantile(0.50)
	p99, lo, hi := got.lagQuantile(0.99)
	extra := map[string]any{}
	for k, v := range got.Events {
		extra[k] = v
	}
	s.Measurements = append(s.Measurements,
		&measurement{Label: "POST, none, " + store, Name: fmt.Sprintf("POST Patient at %d/s, no Subscription, %s", subscriptionRate, long), Load: res[0]},
		&measurement{Label: fmt.Sprintf("POST, %d subs, %s", subscriptionCount, store),
			Name: fmt.Sprintf("POST Patient at %d/s, %d active bot Subscriptions matching each, %s", subscriptionRate, subscriptionCount, long), Load: res[1]},
		&measurement{Label: "lag p50, " + store, Name: fmt.Sprintf("trigger lag p50, %s (write answered → bot run starts)", long), Value: ms(secondsDuration(p50)), Unit: "ms"},
		&measurement{Label: "lag p99, " + store, Extra: extra, Value: ms(secondsDuration(p99)), Unit: "ms",
			Name: fmt.Sprintf("trigger lag p99, %s, of %.0f deliveries (%.0f delivered, %.0f failed, %.0f retried, %.0f dropped), in the %g–%g s bucket",
				long, got.lagCount(), got.Events["delivered"], got.Events["failed"], got.Events["retried"], got.Events["dropped"], lo, hi)},
	)
	ratioCheck := newCheck("client write p99 with Subscriptions ÷ none, "+long, ratio(res[1].P99Ms, res[0].P99Ms), "<=", 1.2, "")
	ratioCheck.Label = "p99 ratio, " + store
	lagCheck := newCheck("trigger lag p99, "+long+" (fhirgate's histogram, interpolated in its bucket)", ms(secondsDuration(p99)), "<=", 1000, "ms")
	lagCheck.Label = "lag p99, " + store
	s.Checks = append(s.Checks, ratioCheck, lagCheck)
	s.Measurements = append(s.Measurements, control.measurements...)
	s.Checks = append(s.Checks, control.check)
	return nil
}

// cpuControl is the result of deliveriesCPUControl.
type cpuControl struct {
	measurements []*measurement
	check        *check
}

// deliveriesCPUControl tells CPU from everything else in a subscribed
// write's extra p99: writes with no Subscription, alternating (in order)
// with writes beside startCPULoad spending, in the harness's process,
// the CPU per write that the deliveries added to the gateway and its
// workers in res (PostgreSQL's own work is not in it). A ratio near 1
// says the machine has room for that CPU when it is spent elsewhere. store
// labels the rows, long names the store in them.
func (h *harness) deliveriesCPUControl(ctx context.Context, p *caddyProc, store, long string, spec loadSpec, order []int, res [2]*loadResult) (cpuControl, error) {
	name := "client write p99 beside the deliveries' CPU spent in another process ÷ none, " + long
	extra := time.Duration((res[1].ServerCPUPerRequestUs - res[0].ServerCPUPerRequestUs) * float64(time.Microsecond))
	if extra <= 0 {
		why := fmt.Sprintf("the subscribed writes cost no more CPU than the others (%.0f vs %.0f µs per write)",
			res[1].ServerCPUPerRequestUs, res[0].ServerCPUPerRequestUs)
		c := unavailableCheck(name, "<=", 1.2, "", why)
		c.Verdict, c.Label = verdictNA, "ctl ratio, "+store
		return cpuControl{check: c}, nil
	}
	sides := [2]string{"none", "cpu"}
	var parts [2][]*loadResult
	for k, side := range order {
		stop := func() {}
		if side == 1 {
			stop = startCPULoad(extra, subscriptionRate)
		}
		r, err := h.load(ctx, p, fmt.Sprintf("12-control-%s-%s-%d", sides[side], store, k/2+1), spec)
		stop()
		if err != nil {
			return cpuControl{}, err
		}
		parts[side] = append(parts[side], r)
	}
	var got [2]*loadResult
	for i := range got {
		var err error
		if got[i], err = mergeResults(parts[i]...); err != nil {
			return cpuControl{}, err
		}
	}
	c := newCheck(name, ratio(got[1].P99Ms, got[0].P99Ms), "<=", 1.2, "")
	c.Verdict, c.Label = verdictNA, "ctl ratio, "+store
	c.Note = "information: the CPU, not the deliveries' other effects on the gateway"
	return cpuControl{
		measurements: []*measurement{
			{Label: "ctl none, " + store, Name: fmt.Sprintf("POST Patient at %d/s, no Subscription, %s, compared with the row below", subscriptionRate, long), Load: got[0]},
			{Label: "ctl +CPU, " + store, Load: got[1], Name: fmt.Sprintf(
				"POST Patient at %d/s, no Subscription, %s, while the harness spends %.0f µs of CPU per write on %d threads (the deliveries' extra CPU per write in the gateway and its workers)",
				subscriptionRate, long, float64(extra)/float64(time.Microsecond), cpuLoadThreads)},
		},
		check: c,
	}, nil
}

// secondsDuration converts seconds, +Inf to the largest duration.
func secondsDuration(s float64) time.Duration {
	if math.IsInf(s, 1) || s > math.MaxInt64/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}

// drainSubscriptions waits until every trigger queued since before has
// ended its deliveries (subscriptionCount per write) and returns the
// metrics' difference. Deliveries still running after subscriptionDrain
// are an error: the lag would be measured on the fast ones only.
func (h *harness) drainSubscriptions(ctx context.Context, p *caddyProc, before subscriptionMetrics) (subscriptionMetrics, error) {
	began := time.Now()
	for {
		now, err := p.subscriptionMetrics(ctx)
		if err != nil {
			return subscriptionMetrics{}, err
		}
		d := now.since(before)
		want := d.Events["queued"] * subscriptionCount
		if d.Events["lost"] > 0 {
			return d, fmt.Errorf("%.0f writes lost their triggers", d.Events["lost"])
		}
		if want > 0 && d.finished() >= want {
			h.logf("  %.0f deliveries of %.0f writes ended %s after the load", d.finished(), d.Events["queued"], time.Since(began).Round(time.Millisecond))
			return d, nil
		}
		if time.Since(began) > subscriptionDrain {
			return d, fmt.Errorf("%.0f of %.0f deliveries ended %s after the load", d.finished(), want, subscriptionDrain)
		}
		select {
		case <-ctx.Done():
			return d, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// createSubscriptions creates subscriptionCount active Subscriptions on
// every Patient create, each running Bot/botID, and returns their ids.
func createSubscriptions(ctx context.Context, p *caddyProc, token, botID string) ([]string, error) {
	body := `{"resourceType":"Subscription","status":"active","reason":"bench","criteria":"Patient",` +
		`"channel":{"type":"rest-hook","endpoint":"Bot/` + botID + `"},"extension":[{"url":` +
		`"https://medplum.com/fhir/StructureDefinition/subscription-supported-interaction","valueCode":"create"}]}`
	r := requestSpec{Method: http.MethodPost, URL: "http://" + p.sites.gateway + "/fhir/R4/Subscription",
		Header: map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/fhir+json"}, Body: body}
	var ids []string
	for range subscriptionCount {
		status, answer, err := send(ctx, r)
		if err != nil {
			return ids, fmt.Errorf("creating a Subscription: %w", err)
		}
		var sub struct {
			ID string `json:"id"`
		}
		if status != http.StatusCreated || json.Unmarshal([]byte(answer), &sub) != nil || sub.ID == "" {
			return ids, fmt.Errorf("creating a Subscription: HTTP %d: %s", status, oneLine(answer, 200))
		}
		ids = append(ids, sub.ID)
	}
	return ids, nil
}

// deleteSubscriptions deletes the Subscriptions ids.
func deleteSubscriptions(ctx context.Context, p *caddyProc, token string, ids []string) error {
	var errs []error
	for _, id := range ids {
		status, answer, err := send(ctx, requestSpec{Method: http.MethodDelete, URL: "http://" + p.sites.gateway + "/fhir/R4/Subscription/" + id,
			Header: map[string]string{"Authorization": "Bearer " + token}})
		if err == nil && status != http.StatusOK && status != http.StatusNoContent {
			err = fmt.Errorf("HTTP %d: %s", status, oneLine(answer, 200))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting Subscription/%s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// mainInstance is the Caddy that scenarios 1, 2, 3 and 5 run against,
// with its access token and what the $execute probe found.
type mainInstance struct {
	p           *caddyProc
	token       string
	idleMem     memStatus
	execute     requestSpec
	executeNote string // why $execute is unavailable, "" when it works
}

// setupMain starts the main instance, reads its idle RSS, gets an access
// token and probes $execute.
func (h *harness) setupMain(ctx context.Context) (*mainInstance, error) {
	p, err := h.startInstance(ctx, "main", 0, 0, declaredUsers, true)
	if err != nil {
		return nil, err
	}
	m := &mainInstance{p: p}
	// Let startup garbage settle before reading the idle footprint.
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
	if m.idleMem, err = readMem(p.pid()); err != nil {
		p.stop()
		return nil, err
	}
	if m.token, err = exchange(ctx, p.sites.gateway, h.userToken(0, "setup")); err != nil {
		p.stop()
		return nil, err
	}
	m.execute = jsonPOST(executeURL(p.sites.gateway, "echo"), m.token, echoInput)
	if m.executeNote, err = probeExecute(ctx, m.execute); err != nil {
		p.stop()
		return nil, err
	}
	if m.executeNote != "" {
		h.logf("bot scenarios unavailable: %s", m.executeNote)
	}
	return m, nil
}

// proxyScenario is scenario 1: the same GET, with the same bearer token,
// through reverse_proxy alone and through fhirgate + reverse_proxy.
func (h *harness) proxyScenario(ctx context.Context, m *mainInstance) (*scenario, error) {
	s := &scenario{ID: 1, Title: "authenticated proxy vs plain proxy (GET /fhir/R4/Patient/1)"}
	plain, gated := patientGET(m.p.sites.plain, m.token), patientGET(m.p.sites.gateway, m.token)
	var res [2][2]*loadResult // [saturated, latency][plain, gated]
	for i, c := range []int{h.set.Concurrency, h.set.LatencyConcurrency} {
		suffix := ""
		if i == 1 {
			suffix = "-latency"
		}
		a, b, err := h.compare(ctx,
			namedLoad{m.p, "1-plain" + suffix, h.spec(c, plain)},
			namedLoad{m.p, "1-gated" + suffix, h.spec(c, gated)})
		if err != nil {
			return s, err
		}
		res[i] = [2]*loadResult{a, b}
		s.Measurements = append(s.Measurements,
			&measurement{Name: fmt.Sprintf("plain reverse_proxy, c=%d", c), Load: a},
			&measurement{Name: fmt.Sprintf("fhirgate + reverse_proxy, c=%d", c), Load: b})
	}
	c, lc := h.set.Concurrency, h.set.LatencyConcurrency
	added := newCheck(fmt.Sprintf("added p99, c=%d", c), res[0][1].P99Ms-res[0][0].P99Ms, "<=", 0.5, "ms")
	added.Verdict, added.Note = verdictNA, "information: at saturation p99 is queueing, i.e. the throughput ratio again"
	s.Checks = append(s.Checks,
		newCheck(fmt.Sprintf("throughput ratio gated/plain, c=%d", c), ratio(res[0][1].Throughput, res[0][0].Throughput), ">=", 0.90, ""),
		newCheck(fmt.Sprintf("added p99, c=%d", lc), res[1][1].P99Ms-res[1][0].P99Ms, "<=", 0.5, "ms"),
		added,
	)
	return s, nil
}

// exchangeScenario is scenario 2: token exchanges with the userinfo cache
// warm (one subject token) and useless (a new token every request).
func (h *harness) exchangeScenario(ctx context.Context, m *mainInstance) (*scenario, error) {
	s := &scenario{ID: 2, Title: "token exchange (POST /oauth2/token, RFC 8693)"}
	c := h.set.Concurrency
	cached, err := h.load(ctx, m.p, "2-exchange-cached", h.spec(c, exchangePOST(m.p.sites.gateway, h.userToken(1, "cached"))))
	if err != nil {
		return s, err
	}
	s.Measurements = append(s.Measurements, &measurement{Name: fmt.Sprintf("exchange, userinfo cached, c=%d", c), Load: cached})
	uncached, err := h.load(ctx, m.p, "2-exchange-uncached", h.spec(c, exchangePOST(m.p.sites.gateway, h.distinctTokens(declaredUsers, "uncached"))))
	if err != nil {
		return s, err
	}
	s.Measurements = append(s.Measurements, &measurement{
		Name: fmt.Sprintf("exchange, every token distinct (%d users), c=%d", declaredUsers, c), Load: uncached,
	})
	s.Checks = append(s.Checks,
		newCheck("cached exchanges/s", cached.Throughput, ">=", 2000, "/s"),
		newCheck("uncached exchanges/s", uncached.Throughput, ">=", 1000, "/s"),
	)
	return s, nil
}

// botScenario is scenario 3: $execute of the echo bot vs an authenticated
// respond of the same size.
func (h *harness) botScenario(ctx context.Context, m *mainInstance) (*scenario, error) {
	s := &scenario{ID: 3, Title: "bot execution (POST /fhir/R4/Bot/$execute?identifier=, JSON echo)"}
	c := h.set.Concurrency
	respond := namedLoad{m.p, "3-respond", h.spec(c, jsonPOST("http://"+m.p.sites.respond+"/fhir/R4/Basic/echo", m.token, echoInput))}
	respondName := fmt.Sprintf("fhirgate + respond (%d B), c=%d", len(echoInput), c)
	const name = "execution ratio bot/respond"
	if m.executeNote != "" {
		base, err := h.load(ctx, respond.p, respond.profile, respond.spec)
		if err != nil {
			return s, err
		}
		s.Measurements = append(s.Measurements,
			&measurement{Name: respondName, Load: base},
			&measurement{Name: "echo bot $execute", Unavailable: m.executeNote})
		s.Checks = append(s.Checks, unavailableCheck(name, ">=", 0.50, "", "bot not measured"))
		return s, nil
	}
	base, bot, err := h.compare(ctx, respond, namedLoad{m.p, "3-execute", h.spec(c, m.execute)})
	if err != nil {
		return s, err
	}
	s.Measurements = append(s.Measurements,
		&measurement{Name: respondName, Load: base},
		&measurement{Name: fmt.Sprintf("echo bot $execute, c=%d", c), Load: bot})
	s.Checks = append(s.Checks, newCheck(name, ratio(bot.Throughput, base.Throughput), ">=", 0.50, ""))
	return s, nil
}

// mixedRequests is the memory scenario's mix, shaped like a gateway's day:
// mostly authenticated reads (6 in 10), then one each of a bot run, an
// authenticated respond, an exchange with a known token and an exchange
// with a new one. (Exchanges are rarer in real use, one per sign-in; at
// one in five they still write a Login every few requests.)
func (h *harness) mixedRequests(m *mainInstance, purpose string) []requestSpec {
	get := patientGET(m.p.sites.gateway, m.token)
	reqs := []requestSpec{
		get, get,
		exchangePOST(m.p.sites.gateway, h.userToken(2, purpose)),
		get, get,
		jsonPOST("http://"+m.p.sites.respond+"/fhir/R4/Basic/echo", m.token, echoInput),
		get, get,
		exchangePOST(m.p.sites.gateway, h.distinctTokens(declaredUsers, purpose)),
	}
	if m.executeNote == "" {
		reqs = append(reqs, m.execute)
	}
	return reqs
}

// memoryScenario is scenario 5: RSS idle, after the mixed requests, and its
// growth over a soak under the same mix.
func (h *harness) memoryScenario(ctx context.Context, m *mainInstance) (*scenario, error) {
	s := &scenario{ID: 5, Title: "memory (VmRSS of the caddy process)"}
	s.Measurements = append(s.Measurements, &measurement{
		Name: "RSS idle after start (" + m.idleMem.describe() + ")", Value: m.idleMem.RSS, Unit: "MiB", Extra: map[string]any{"mem": m.idleMem},
	})
	s.Checks = append(s.Checks,
		newCheck("RSS idle", m.idleMem.RSS, "<=", 80, "MiB"),
		newCheck("caddy + bot workers PSS idle", m.idleMem.TreePSS, "<=", 80, "MiB"))

	n := h.set.MixedRequests
	mixSpec := loadSpec{Requests: h.mixedRequests(m, "mixed"), Concurrency: h.set.Concurrency, MaxRequests: n, Duration: duration(10 * time.Minute)}
	mixed, err := h.load(ctx, m.p, "5-mixed", mixSpec)
	if err != nil {
		return s, err
	}
	s.Measurements = append(s.Measurements, &measurement{
		Name: fmt.Sprintf("%d mixed requests (%d kinds), c=%d", n, len(mixSpec.Requests), h.set.Concurrency), Load: mixed,
	})
	after, err := readMem(m.p.pid())
	if err != nil {
		return s, err
	}
	h.heapProfile(ctx, m.p, "5-heap-after-mixed")
	s.Measurements = append(s.Measurements, &measurement{
		Name: fmt.Sprintf("RSS after %d mixed requests (%s)", n, after.describe()), Value: after.RSS, Unit: "MiB", Extra: map[string]any{"mem": after},
	})
	afterCheck := newCheck(fmt.Sprintf("RSS after %d mixed requests", n), after.RSS, "<=", 200, "MiB")
	// With bot_isolation process the bots' memory is in worker processes;
	// the gateway's footprint is caddy's and theirs together.
	treeCheck := newCheck(fmt.Sprintf("caddy + bot workers PSS after %d mixed requests", n), after.TreePSS, "<=", 200, "MiB")
	if n < 100_000 {
		afterCheck.Note = "short mode: target is defined after 100000"
		treeCheck.Note = afterCheck.Note
	}
	s.Checks = append(s.Checks, afterCheck, treeCheck)

	soak := time.Duration(h.set.Soak)
	samples, soakLoad, err := h.soak(ctx, m, soak)
	if err != nil {
		return s, err
	}
	h.heapProfile(ctx, m.p, "5-heap-after-soak")
	first, last := samples[0], samples[len(samples)-1]
	var peak memStatus
	for _, x := range samples {
		if x.RSS > peak.RSS {
			peak = x.memStatus
		}
	}
	startLevel, endLevel := soakLevels(samples)
	growth := (endLevel - startLevel) / startLevel * 100
	s.Measurements = append(s.Measurements,
		&measurement{Name: fmt.Sprintf("soak %s under the mix, c=%d", soak, h.set.Concurrency), Load: soakLoad},
		&measurement{
			Name: "RSS at soak end (" + last.describe() + ")", Value: last.RSS, Unit: "MiB",
			Extra: map[string]any{
				"start": first.memStatus, "end": last.memStatus, "peak": peak, "samples": samples,
				"start_level_mib": startLevel, "end_level_mib": endLevel,
			},
		},
		&measurement{Name: "peak RSS during the soak (" + peak.describe() + ")", Value: peak.RSS, Unit: "MiB"},
	)
	growthCheck := newCheck(fmt.Sprintf("RSS growth over the %s soak (median of the last fifth vs the first: %.0f → %.0f MiB)", soak, startLevel, endLevel),
		growth, "<=", 10, "%")
	if soak < fullSoak {
		growthCheck.Note = "short soak, not the 5-minute target"
	}
	s.Checks = append(s.Checks, growthCheck)
	return s, nil
}

// heapProfile saves Caddy's heap profile when profiling; a failure is
// reported, not fatal.
func (h *harness) heapProfile(ctx context.Context, p *caddyProc, name string) {
	if h.profileDir == "" {
		return
	}
	if err := p.heapProfile(ctx, filepath.Join(h.profileDir, name+".pprof")); err != nil {
		h.logf("heap profile %s: %v", name, err)
	}
}

// soakLevels are the median RSS of the first and of the last fifth of the
// soak. RSS swings by tens of MiB within seconds (garbage-collector cycles,
// Badger flushing a memtable); a leak shows as a rising level, which the
// medians keep and a single reading at each end does not.
func soakLevels(samples []rssSample) (start, end float64) {
	n := max(1, len(samples)/5)
	return medianRSS(samples[:n]), medianRSS(samples[len(samples)-n:])
}

func medianRSS(samples []rssSample) float64 {
	v := make([]float64, len(samples))
	for i, s := range samples {
		v[i] = s.RSS
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// rssSample is one memory reading during the soak.
type rssSample struct {
	Seconds float64 `json:"t"`
	memStatus
}

// soak runs the mix for d while sampling Caddy's memory.
func (h *harness) soak(ctx context.Context, m *mainInstance, d time.Duration) ([]rssSample, *loadResult, error) {
	every := max(d/60, 250*time.Millisecond)
	start := time.Now()
	first, err := readMem(m.p.pid())
	if err != nil {
		return nil, nil, err
	}
	samples := []rssSample{{0, first}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if v, err := readMem(m.p.pid()); err == nil {
					samples = append(samples, rssSample{time.Since(start).Seconds(), v})
				}
			}
		}
	}()
	spec := loadSpec{Requests: h.mixedRequests(m, "soak"), Concurrency: h.set.Concurrency, Duration: duration(d)}
	res, err := h.load(ctx, m.p, "5-soak", spec)
	close(stop)
	<-done
	if err != nil {
		return nil, nil, err
	}
	if v, err := readMem(m.p.pid()); err == nil {
		samples = append(samples, rssSample{time.Since(start).Seconds(), v})
	}
	return samples, res, nil
}

// growthScenario is scenario 6: the same exchanges and the same bot runs
// against a small and a large store; per-request cost is 1/throughput.
// Both instances run side by side (only one is loaded at a time) and are
// compared like the other pairs (A-B-B-A in full mode).
func (h *harness) growthScenario(ctx context.Context) (*scenario, error) {
	s := &scenario{ID: 6, Title: "growth (per-request cost, small vs large store)"}
	c := h.set.Concurrency
	users, bots := h.set.GrowthUsers, h.set.GrowthBots
	var procs [2]*caddyProc
	var tokens [2]string
	for i := range 2 {
		name := "growth-" + strconv.Itoa(users[i]) + "u-" + strconv.Itoa(bots[i]) + "b"
		p, err := h.startInstance(ctx, name, users[i], bots[i], 0, false)
		if err != nil {
			return s, err
		}
		defer p.stop()
		procs[i] = p
		if tokens[i], err = exchange(ctx, p.sites.gateway, h.userToken(0, name+"-setup")); err != nil {
			return s, err
		}
	}

	var exch [2]namedLoad
	for i, p := range procs {
		// The same growthTokens subject tokens at both sizes, spread over
		// all the users: after the warmup every userinfo answer is cached
		// and each exchange looks its user up by email in the store.
		subject := subjectTokenPrefix + "{spread:" + strconv.Itoa(growthTokens) + ":" + strconv.Itoa(users[i]) + "}." +
			h.tokenTail(fmt.Sprintf("growth-%d", i)) + "-{seqmod:" + strconv.Itoa(growthTokens) + "}"
		exch[i] = namedLoad{p, fmt.Sprintf("6-exchange-%d-users", users[i]), h.spec(c, exchangePOST(p.sites.gateway, subject))}
	}
	small, large, err := h.compare(ctx, exch[0], exch[1])
	if err != nil {
		return s, err
	}
	for i, l := range []*loadResult{small, large} {
		s.Measurements = append(s.Measurements, &measurement{
			Name: fmt.Sprintf("exchange by email, %d users (%d tokens), c=%d", users[i], growthTokens, c), Load: l,
		})
	}
	s.Checks = append(s.Checks, newCheck(
		fmt.Sprintf("exchange cost %d/%d users", users[1], users[0]), ratio(small.Throughput, large.Throughput), "<=", 1.20, ""))

	botName := fmt.Sprintf("$execute cost %d/%d bots", bots[1], bots[0])
	var exec [2]namedLoad
	for i, p := range procs {
		deployed := make([]int, growthDeployed)
		for j := range deployed {
			deployed[j] = j * bots[i] / growthDeployed
			if err := p.deployBot(ctx, botID(deployed[j]), "echo.js", echoBotCode); err != nil {
				return s, err
			}
		}
		probe := jsonPOST(executeURL(p.sites.gateway, botValue(deployed[0])), tokens[i], echoInput)
		why, err := probeExecute(ctx, probe)
		if err != nil {
			return s, err
		}
		if why != "" {
			s.Measurements = append(s.Measurements, &measurement{Name: "$execute by identifier", Unavailable: why})
			s.Checks = append(s.Checks, unavailableCheck(botName, "<=", 1.20, "", "bot not measured"))
			return s, nil
		}
		value := "bot{spread:" + strconv.Itoa(growthDeployed) + ":" + strconv.Itoa(bots[i]) + "}"
		req := jsonPOST(executeURL(p.sites.gateway, value), tokens[i], echoInput)
		exec[i] = namedLoad{p, fmt.Sprintf("6-execute-%d-bots", bots[i]), h.spec(c, req)}
	}
	small, large, err = h.compare(ctx, exec[0], exec[1])
	if err != nil {
		return s, err
	}
	for i, l := range []*loadResult{small, large} {
		s.Measurements = append(s.Measurements, &measurement{
			Name: fmt.Sprintf("$execute by identifier, %d bots (%d with code), c=%d", bots[i], growthDeployed, c), Load: l,
		})
	}
	s.Checks = append(s.Checks, newCheck(botName, ratio(small.Throughput, large.Throughput), "<=", 1.20, ""))
	return s, nil
}

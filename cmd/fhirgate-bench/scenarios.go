package main

import (
	"context"
	"fmt"
	"time"
)

// mainInstance is the Caddy that scenarios 1, 2, 3, 5 and 7 run against,
// with its access token and what the $execute probe found.
type mainInstance struct {
	p           *caddyProc
	token       string
	idleMem     memStatus
	execute     requestSpec
	executeNote string // why $execute is unavailable, "" when it works

	executeUnaudited requestSpec // the same echo bot, declared without AuditEvents
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
	if m.idleMem, err = readMem(p); err != nil {
		p.stop()
		return nil, err
	}
	if m.token, err = exchange(ctx, p.sites.gateway, h.userToken(0, "setup")); err != nil {
		p.stop()
		return nil, err
	}
	m.execute = jsonPOST(executeURL(p.sites.gateway, "echo"), m.token, echoInput)
	m.executeUnaudited = jsonPOST(executeURL(p.sites.gateway, unauditedEcho), m.token, echoInput)
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
	// The AuditEvent is the largest cost of a run after the JavaScript: the same bot declared
	// with audit_event_trigger never, against its own respond baseline. It runs first, because
	// part of an audit write's cost comes later (memtable flushes, compaction) and would be
	// charged to whatever load follows.
	base0, quiet, err := h.compare(ctx, namedLoad{m.p, "3-respond-for-unaudited", respond.spec},
		namedLoad{m.p, "3-execute-unaudited", h.spec(c, m.executeUnaudited)})
	if err != nil {
		return s, err
	}
	base, bot, err := h.compare(ctx, respond, namedLoad{m.p, "3-execute", h.spec(c, m.execute)})
	if err != nil {
		return s, err
	}
	s.Measurements = append(s.Measurements,
		&measurement{Name: respondName, Load: base},
		&measurement{Name: fmt.Sprintf("echo bot $execute, c=%d", c), Load: bot},
		&measurement{Name: respondName + ", with the row below", Load: base0},
		&measurement{Name: fmt.Sprintf("echo bot $execute, audit_event_trigger never, c=%d", c), Load: quiet})
	noAudit := newCheck("execution ratio without AuditEvents", ratio(quiet.Throughput, base0.Throughput), ">=", 0.50, "")
	noAudit.Verdict, noAudit.Note = verdictNA, "information: the same run without its audit write"
	s.Checks = append(s.Checks, newCheck(name, ratio(bot.Throughput, base.Throughput), ">=", 0.50, ""), noAudit)
	return s, nil
}

package main

import (
	"context"
	"fmt"
	"strconv"
)

// growthScenario is scenario 6: the same exchanges and the same bot runs
// against a small and a large store; per-request cost is 1/throughput.
// Both instances run side by side (only one is loaded at a time) and are
// compared like the other pairs (interleaved in full mode).
func (h *harness) growthScenario(ctx context.Context) (*scenario, error) {
	s := &scenario{ID: 6, Short: "store growth", Title: "growth (per-request cost, small vs large store)"}
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
			Label: fmt.Sprintf("exchange, %d users", users[i]),
			Name:  fmt.Sprintf("exchange by email, %d users (%d tokens), c=%d", users[i], growthTokens, c), Load: l,
		})
	}
	exchCost := newCheck(fmt.Sprintf("exchange cost %d/%d users", users[1], users[0]), ratio(small.Throughput, large.Throughput), "<=", 1.20, "")
	exchCost.Label = "exchange cost ratio"
	s.Checks = append(s.Checks, exchCost)

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
			Label: fmt.Sprintf("$execute, %d bots", bots[i]),
			Name:  fmt.Sprintf("$execute by identifier, %d bots (%d with code), c=%d", bots[i], growthDeployed, c), Load: l,
		})
	}
	botCost := newCheck(botName, ratio(small.Throughput, large.Throughput), "<=", 1.20, "")
	botCost.Label = "$execute cost ratio"
	s.Checks = append(s.Checks, botCost)
	return s, nil
}

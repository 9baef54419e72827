package main

import (
	"context"
	"fmt"
)

// postgresScenarioID numbers the storage scenario.
const postgresScenarioID = 11

// postgresScenario is scenario 11: the same exchanges and $execute against
// the main instance (Badger) and a second one whose store is on
// PostgreSQL (a database created for the run and dropped after), in one
// run, alternating.
func (h *harness) postgresScenario(ctx context.Context, m *mainInstance) (*scenario, error) {
	s := &scenario{ID: postgresScenarioID, Short: "PostgreSQL store", Title: "the store on PostgreSQL vs Badger (exchanges and $execute)"}
	unavailable := func(why string) (*scenario, error) {
		s.Measurements = append(s.Measurements, &measurement{Label: "PostgreSQL", Name: "gateway on PostgreSQL", Unavailable: why})
		s.Checks = append(s.Checks,
			unavailableCheck("cached exchanges/s PostgreSQL ÷ Badger", ">=", 0.7, "", why),
			unavailableCheck("cached exchange p99 PostgreSQL ÷ Badger", "<=", 2, "", why))
		return s, nil
	}
	dsn, drop, err := benchDatabase(ctx, h.nonce)
	if err != nil {
		h.logf("scenario %d unavailable: %v", postgresScenarioID, err)
		return unavailable(err.Error())
	}
	defer drop()
	p, err := h.startInstanceOn(ctx, "postgres", 0, 0, declaredUsers, true, dsn)
	if err != nil {
		return s, err
	}
	defer p.stop()
	token, err := exchange(ctx, p.sites.gateway, h.userToken(0, "pg-setup"))
	if err != nil {
		return s, err
	}
	c := h.set.Concurrency
	pairs := []struct {
		label, name, profile string
		badger, postgres     requestSpec
	}{
		{"exchange, cached", "exchange, userinfo cached", "11-exchange-cached",
			exchangePOST(m.p.sites.gateway, h.userToken(1, "pg-cached")), exchangePOST(p.sites.gateway, h.userToken(1, "pg-cached"))},
		{"exchange, new tokens", fmt.Sprintf("exchange, every token distinct (%d users)", declaredUsers), "11-exchange-distinct",
			exchangePOST(m.p.sites.gateway, h.distinctTokens(declaredUsers, "pg-badger")), exchangePOST(p.sites.gateway, h.distinctTokens(declaredUsers, "pg-postgres"))},
	}
	if m.executeNote == "" {
		pairs = append(pairs, struct {
			label, name, profile string
			badger, postgres     requestSpec
		}{"$execute echo", "echo bot $execute (AuditEvent on)", "11-execute",
			m.execute, jsonPOST(executeURL(p.sites.gateway, "echo"), token, echoInput)})
	}
	var cachedB, cachedP *loadResult
	for i, pr := range pairs {
		b, pg, err := h.compare(ctx, namedLoad{m.p, pr.profile + "-badger", h.spec(c, pr.badger)}, namedLoad{p, pr.profile + "-postgres", h.spec(c, pr.postgres)})
		if err != nil {
			return s, err
		}
		s.Measurements = append(s.Measurements,
			&measurement{Label: pr.label + ", Badger", Name: fmt.Sprintf("%s, Badger, c=%d", pr.name, c), Load: b},
			&measurement{Label: pr.label + ", PG", Name: fmt.Sprintf("%s, PostgreSQL, c=%d", pr.name, c), Load: pg})
		if i == 0 {
			cachedB, cachedP = b, pg
		} else {
			info := newCheck(pr.label+" PostgreSQL ÷ Badger", ratio(pg.Throughput, b.Throughput), ">=", 0.7, "")
			info.Verdict, info.Note = verdictNA, "information"
			s.Checks = append(s.Checks, info)
		}
	}
	s.Checks = append([]*check{
		newCheck("cached exchanges/s PostgreSQL ÷ Badger", ratio(cachedP.Throughput, cachedB.Throughput), ">=", 0.7, ""),
		newCheck("cached exchange p99 PostgreSQL ÷ Badger", ratio(cachedP.P99Ms, cachedB.P99Ms), "<=", 2, ""),
	}, s.Checks...)
	return s, nil
}

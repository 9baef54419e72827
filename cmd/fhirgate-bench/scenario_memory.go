package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"
)

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
	s := &scenario{ID: 5, Short: "memory", Title: "memory (VmRSS of the caddy process)"}
	s.Measurements = append(s.Measurements, &measurement{
		Label: "RSS idle",
		Name:  "RSS idle after start (" + m.idleMem.describe() + ")", Value: m.idleMem.RSS, Unit: "MiB", Extra: map[string]any{"mem": m.idleMem},
	})
	idleTree := newCheck("caddy + bot workers PSS idle", m.idleMem.TreePSS, "<=", 80, "MiB")
	idleTree.Label = "PSS with workers"
	s.Checks = append(s.Checks, newCheck("RSS idle", m.idleMem.RSS, "<=", 80, "MiB"), idleTree)

	n := h.set.MixedRequests
	mixSpec := loadSpec{Requests: h.mixedRequests(m, "mixed"), Concurrency: h.set.Concurrency, MaxRequests: n, Duration: duration(10 * time.Minute)}
	mixed, err := h.load(ctx, m.p, "5-mixed", mixSpec)
	if err != nil {
		return s, err
	}
	s.Measurements = append(s.Measurements, &measurement{
		Label: fmt.Sprintf("%d mixed", n),
		Name:  fmt.Sprintf("%d mixed requests (%d kinds), c=%d", n, len(mixSpec.Requests), h.set.Concurrency), Load: mixed,
	})
	after, err := readMem(m.p)
	if err != nil {
		return s, err
	}
	h.heapProfile(ctx, m.p, "5-heap-after-mixed")
	s.Measurements = append(s.Measurements, &measurement{
		Label: "RSS after the mix",
		Name:  fmt.Sprintf("RSS after %d mixed requests (%s)", n, after.describe()), Value: after.RSS, Unit: "MiB", Extra: map[string]any{"mem": after},
	})
	afterCheck := newCheck(fmt.Sprintf("RSS after %d mixed requests", n), after.RSS, "<=", 200, "MiB")
	// With bot_isolation process the bots' memory is in worker processes;
	// the gateway's footprint is caddy's and theirs together.
	treeCheck := newCheck(fmt.Sprintf("caddy + bot workers PSS after %d mixed requests", n), after.TreePSS, "<=", 200, "MiB")
	if n < 100_000 {
		afterCheck.Note = "short mode: target is defined after 100000"
		treeCheck.Note = afterCheck.Note
	}
	afterCheck.Label, treeCheck.Label = "RSS after the mix", "PSS with workers"
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
		&measurement{Label: "soak " + soak.String(), Name: fmt.Sprintf("soak %s under the mix, c=%d", soak, h.set.Concurrency), Load: soakLoad},
		&measurement{
			Label: "RSS at soak end",
			Name:  "RSS at soak end (" + last.describe() + ")", Value: last.RSS, Unit: "MiB",
			Extra: map[string]any{
				"start": first.memStatus, "end": last.memStatus, "peak": peak, "samples": samples,
				"start_level_mib": startLevel, "end_level_mib": endLevel,
			},
		},
		&measurement{Label: "peak RSS in the soak", Name: "peak RSS during the soak (" + peak.describe() + ")", Value: peak.RSS, Unit: "MiB"},
	)
	growthCheck := newCheck(fmt.Sprintf("RSS growth over the %s soak (median of the last fifth vs the first: %.0f → %.0f MiB)", soak, startLevel, endLevel),
		growth, "<=", 10, "%")
	if soak < fullSoak {
		growthCheck.Note = "short soak, not the 5-minute target"
	}
	growthCheck.Label = "RSS growth in soak"
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
	first, err := readMem(m.p)
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
				if v, err := readMem(m.p); err == nil {
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
	if v, err := readMem(m.p); err == nil {
		samples = append(samples, rssSample{time.Since(start).Seconds(), v})
	}
	return samples, res, nil
}

package main

import "time"

// settings are the sizes and durations of a run. Short mode keeps the
// whole run well under two minutes for CI; full mode is what the targets
// are judged on.
type settings struct {
	Concurrency int `json:"concurrency"`
	// Warmup and Measure are per load run.
	Warmup  duration `json:"warmup"`
	Measure duration `json:"measure"`
	// LatencyConcurrency is the closed-loop concurrency of the added-latency
	// runs: low, so queueing does not swamp the per-request cost.
	LatencyConcurrency int `json:"latency_concurrency"`
	// MixedRequests is the request count after which RSS is read.
	MixedRequests uint64 `json:"mixed_requests"`
	// Soak is how long the RSS-growth soak runs.
	Soak duration `json:"soak"`
	// GrowthUsers and GrowthBots are the small and large store sizes.
	GrowthUsers [2]int `json:"growth_users"`
	GrowthBots  [2]int `json:"growth_bots"`
	// HL7 is how long each HL7 parser runs.
	HL7 duration `json:"hl7"`
	// Rounds is how many A-B pairs a comparison is measured in (see
	// comparisonOrder); a power of two. Each segment gets its own warm-up.
	Rounds int `json:"rounds"`
	// BotIsolation is fhirgate's bot_isolation; "" is its default.
	BotIsolation string `json:"bot_isolation,omitempty"`
	// BotMaxConcurrent is fhirgate's bot_max_concurrent; 0 is its default.
	BotMaxConcurrent int `json:"bot_max_concurrent,omitempty"`
	// BotRunsPerWorker is fhirgate's bot_runs_per_worker; 0 is its default.
	BotRunsPerWorker int `json:"bot_runs_per_worker,omitempty"`
}

func defaultSettings(short bool) settings {
	if short {
		return settings{
			Concurrency:        32,
			Warmup:             duration(500 * time.Millisecond),
			Measure:            duration(2 * time.Second),
			LatencyConcurrency: 1,
			MixedRequests:      10_000,
			Soak:               duration(5 * time.Second),
			GrowthUsers:        [2]int{100, 2_000},
			GrowthBots:         [2]int{10, 200},
			HL7:                duration(2 * time.Second),
			Rounds:             1,
		}
	}
	return settings{
		Concurrency:        32,
		Warmup:             duration(2 * time.Second),
		Measure:            duration(10 * time.Second),
		LatencyConcurrency: 1,
		MixedRequests:      100_000,
		Soak:               duration(5 * time.Minute),
		GrowthUsers:        [2]int{100, 100_000},
		GrowthBots:         [2]int{10, 10_000},
		HL7:                duration(10 * time.Second),
		Rounds:             4,
	}
}

// Fixed workload shapes shared by the scenarios.
const (
	// declaredUsers are declared in the main instance's Caddyfile; the
	// uncached exchanges spread over them.
	declaredUsers = 64
	// growthTokens is how many distinct subject tokens the growth runs
	// cycle through, at both store sizes, so the userinfo cache behaves
	// the same and only the store's size differs.
	growthTokens = 256
	// growthDeployed is how many bots get code in the bot-growth runs,
	// spread over the whole store.
	growthDeployed = 10
	// fullSoak is the soak the memory target is defined on.
	fullSoak = 5 * time.Minute
)

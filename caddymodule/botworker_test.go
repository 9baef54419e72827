package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
)

func TestBotIsolationOptions(t *testing.T) {
	tests := []struct {
		name, input string
		isolation   string
		memory      int64
		runs        int
		err         string
	}{
		{"both", "fhirgate {\n\tbot_isolation inprocess\n\tbot_worker_memory 512MiB\n}", "inprocess", 512 << 20, 0, ""},
		{"decimal size", "fhirgate {\n\tbot_worker_memory 300MB\n}", "", 300_000_000, 0, ""},
		{"runs per worker", "fhirgate {\n\tbot_runs_per_worker 1\n}", "", 0, 1, ""},
		{"zero runs per worker", "fhirgate {\n\tbot_runs_per_worker 0\n}", "", 0, 0, "invalid bot_runs_per_worker '0': must be a positive integer"},
		{"duplicate runs per worker", "fhirgate {\n\tbot_runs_per_worker 2\n\tbot_runs_per_worker 3\n}", "", 0, 0, "bot_runs_per_worker already specified"},
		{"duplicate isolation", "fhirgate {\n\tbot_isolation process\n\tbot_isolation inprocess\n}", "", 0, 0, "bot_isolation already specified, at Testfile:3"},
		{"isolation without value", "fhirgate {\n\tbot_isolation\n}", "", 0, 0, "wrong argument count"},
		{"bad size", "fhirgate {\n\tbot_worker_memory lots\n}", "", 0, 0, "invalid bot_worker_memory 'lots'"},
		{"duplicate size", "fhirgate {\n\tbot_worker_memory 1GB\n\tbot_worker_memory 2GB\n}", "", 0, 0, "bot_worker_memory already specified"},
		{"bad bot memory", "fhirgate {\n\tbot_memory 0\n}", "", 0, 0, "invalid bot_memory '0'"},
		{"duplicate bot memory", "fhirgate {\n\tbot_memory 1GB\n\tbot_memory 2GB\n}", "", 0, 0, "bot_memory already specified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := parseGlobalOption(caddyfile.NewTestDispenser(tt.input), nil)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var app App
			if err := json.Unmarshal(v.(httpcaddyfile.App).Value, &app); err != nil {
				t.Fatal(err)
			}
			if app.BotIsolation != tt.isolation || app.BotWorkerMemory != tt.memory || app.BotRunsPerWorker != tt.runs {
				t.Errorf("bot_isolation %q, bot_worker_memory %d, bot_runs_per_worker %d", app.BotIsolation, app.BotWorkerMemory, app.BotRunsPerWorker)
			}
		})
	}
}

func TestBotMemoryOption(t *testing.T) {
	v, err := parseGlobalOption(caddyfile.NewTestDispenser("fhirgate {\n\tbot_memory 96MiB\n}"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var app App
	if err := json.Unmarshal(v.(httpcaddyfile.App).Value, &app); err != nil || app.BotMemory != 96<<20 {
		t.Fatalf("bot_memory %d, %v", app.BotMemory, err)
	}
	// In process it is the runner's heap budget.
	app.BotIsolation, app.logger = "inprocess", zap.NewNop()
	if err := app.provisionBots(); err != nil {
		t.Fatal(err)
	}
	if got := app.runner.(*botrunner.Runner).HeapBudget(); got != 96<<20 {
		t.Errorf("heap budget %d", got)
	}
	// With workers it is the default worker memory, which bot_worker_memory overrides.
	for _, tc := range []struct {
		bot, worker int64
		err         string
	}{{1 << 20, 0, "below the minimum"}, {1 << 20, 128 << 20, ""}} {
		a := &App{BotMemory: tc.bot, BotWorkerMemory: tc.worker, logger: zap.NewNop()}
		err := a.provisionBots()
		_ = a.Cleanup()
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("bot_memory %d, bot_worker_memory %d: %v, want %q", tc.bot, tc.worker, err, tc.err)
		}
	}
}

func TestProvisionBotsPicksTheExecutor(t *testing.T) {
	tests := []struct {
		name      string
		isolation string
		memory    int64
		want      string // "pool", "runner" or an error substring
	}{
		{"default", "", 0, "pool"},
		{"process", "process", 128 << 20, "pool"},
		{"inprocess", "inprocess", 0, "runner"},
		{"unknown", "container", 0, "invalid bot_isolation 'container'"},
		{"too little memory", "process", 1 << 20, "below the minimum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &App{BotIsolation: tt.isolation, BotWorkerMemory: tt.memory, logger: zap.NewNop()}
			err := a.provisionBots()
			defer func() { _ = a.Cleanup() }()
			var got string
			switch a.runner.(type) {
			case *botrunner.Pool:
				got = "pool"
			case *botrunner.Runner:
				got = "runner"
			}
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBotWorkerCommandIsHidden(t *testing.T) {
	cmd := botWorkerCommand()
	if cmd.Name() != botWorkerCommandName || !cmd.Hidden {
		t.Errorf("command %q hidden %v", cmd.Name(), cmd.Hidden)
	}
}

package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
)

// heldClient holds every medplum call until release is closed.
type heldClient struct{ entered, release chan struct{} }

func (c heldClient) Do(ctx context.Context, _, _ string, _ url.Values, _ []byte, _ string, _ http.Header) (int, string, []byte, error) {
	c.entered <- struct{}{}
	select {
	case <-c.release:
	case <-ctx.Done():
		return 0, "", nil, ctx.Err()
	}
	return 200, "application/fhir+json", []byte(`{"resourceType":"Patient","id":"1"}`), nil
}

// provisionedApp provisions and starts an App on the store in dir, as a
// config load does, and cleans it up at the end of the test.
func provisionedApp(t *testing.T, dir string, a *App) *App {
	t.Helper()
	a.StorageDir = dir
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(func() {
		_ = a.Cleanup()
		cancel()
	})
	if err := a.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestReloadSharesTheBotExecutor: two loaded configs (as during a reload)
// run bots on one executor and one slot bound; the new config's limits apply
// in place, and cleaning up the old config leaves the new one's executor
// running.
func TestReloadSharesTheBotExecutor(t *testing.T) {
	dir := t.TempDir()
	old := provisionedApp(t, dir, &App{BotIsolation: isolationInProcess, BotMaxConcurrent: 2, BotQueueTimeout: caddy.Duration(50 * time.Millisecond)})
	cur := provisionedApp(t, dir, &App{BotIsolation: isolationInProcess, BotMaxConcurrent: 2, BotQueueTimeout: caddy.Duration(50 * time.Millisecond)})
	if old.runner != cur.runner || old.slots != cur.slots {
		t.Fatalf("the configs have executors %p and %p, slots %p and %p", old.runner, cur.runner, old.slots, cur.slots)
	}

	client := heldClient{entered: make(chan struct{}, 10), release: make(chan struct{})}
	held := `exports.handler = async (medplum) => (await medplum.readResource('Patient', '1')).id`
	done := make(chan error, 2)
	for _, project := range []string{"p1", "p2"} {
		go func() {
			res, err := old.runner.Run(context.Background(), botrunner.Request{Code: held, Project: project, Medplum: client})
			if err == nil && string(res.Body) != "1" {
				err = errors.New(res.Message)
			}
			done <- err
		}()
		<-client.entered
	}
	// The old config's two runs hold both slots of the bound the configs share.
	quick := botrunner.Request{Code: `exports.handler = () => 'ok'`, Project: "p3"}
	if _, err := cur.runner.Run(context.Background(), quick); !errors.Is(err, botrunner.ErrBusy) {
		t.Errorf("a run of the new config while the old one's fill the bound: err %v, want ErrBusy", err)
	}

	// The old config goes: its runs finish, and the executor serves the new one.
	if err := old.Cleanup(); err != nil {
		t.Fatal(err)
	}
	close(client.release)
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("old config's run: %v", err)
		}
	}
	if res, err := cur.runner.Run(context.Background(), quick); err != nil || string(res.Body) != "ok" {
		t.Errorf("new config's run after the old one was cleaned up: %+v, %v", res, err)
	}

	// A third config's limits apply to the shared slots in place.
	next := provisionedApp(t, dir, &App{BotIsolation: isolationInProcess, BotMaxConcurrent: 3, BotProjectMaxConcurrent: 2})
	if next.runner != cur.runner {
		t.Errorf("a new executor for an unchanged isolation")
	}
	if l := cur.slots.Limits(); l.MaxConcurrent != 3 || l.ProjectMaxConcurrent != 2 || l.QueueTimeout != botrunner.DefaultQueueTimeout {
		t.Errorf("limits after the third config started: %+v", l)
	}
}

func TestReloadSharesTheWorkerPool(t *testing.T) {
	dir := t.TempDir()
	old := provisionedApp(t, dir, &App{})
	cur := provisionedApp(t, dir, &App{})
	pool, ok := old.runner.(*botrunner.Pool)
	if !ok || cur.runner != old.runner {
		t.Fatalf("executors %T %p and %T %p, want one pool", old.runner, old.runner, cur.runner, cur.runner)
	}
	key := cur.executorKey
	if n, _ := botExecutors.References(key); n != 2 {
		t.Errorf("pool references %d, want 2", n)
	}
	if err := old.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if n, ok := botExecutors.References(key); n != 1 || !ok {
		t.Errorf("after the old config's cleanup: pool references %d (%v), want 1: the new config's pool must not be closed", n, ok)
	}

	// Other worker settings: a pool of their own, the same slots.
	other := provisionedApp(t, dir, &App{BotRunsPerWorker: 1})
	inproc := provisionedApp(t, dir, &App{BotIsolation: isolationInProcess})
	if other.runner == botrunner.Executor(pool) || inproc.runner == botrunner.Executor(pool) {
		t.Errorf("changed worker settings share the old pool")
	}
	if other.slots != cur.slots || inproc.slots != cur.slots {
		t.Errorf("executors of different settings have their own slots")
	}
}

func TestBotTimeoutsAreChecked(t *testing.T) {
	tests := []struct {
		name               string
		timeout, maxTimout time.Duration
		err                string
	}{
		{"defaults", 0, 0, ""},
		{"timeout under the default bound", 10 * time.Minute, 0, ""},
		{"timeout over the default bound", 20 * time.Minute, 0, "bot_timeout 20m0s is longer than bot_max_timeout 15m0s"},
		{"timeout over the bound", 2 * time.Minute, time.Minute, "bot_timeout 2m0s is longer than bot_max_timeout 1m0s"},
		{"negative bound", 0, -time.Second, "invalid bot_max_timeout '-1s'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &App{BotIsolation: isolationInProcess, BotTimeout: caddy.Duration(tt.timeout), BotMaxTimeout: caddy.Duration(tt.maxTimout), logger: zap.NewNop()}
			err := a.provisionBots()
			defer func() { _ = a.Cleanup() }()
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("error %v, want %q", err, tt.err)
			}
		})
	}
}

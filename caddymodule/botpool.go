package caddymodule

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
)

// Bot run slots and executors are shared by every loaded config. Caddy
// provisions a new config before it cleans up the old one, so a run pool per
// config would double the slot bound (and the workers) during a reload and
// stop the old config's workers under its async runs.
//
//   - botSlots holds the one botrunner.Slots: the run slot bound and the fair
//     queue. A new config applies its limits to it in place (App.Start).
//   - botExecutors holds the executors, keyed by what cannot change in
//     place (the isolation mode, the worker memory and runs per worker). A
//     config changing one of those gets a new executor for its runs, taking
//     its slots from the same botSlots; runs on the old executor finish there,
//     and its workers stop once the last config using it is cleaned up.
var (
	botSlots     = caddy.NewUsagePool()
	botExecutors = caddy.NewUsagePool()
)

// botSlotsKey is the one key of botSlots.
const botSlotsKey = "bot_slots"

// slotsHandle is botSlots' value. Slots hold no resource.
type slotsHandle struct{ slots *botrunner.Slots }

// Destruct implements caddy.Destructor.
func (slotsHandle) Destruct() error { return nil }

// executorHandle is botExecutors' value.
type executorHandle struct{ exec botrunner.Executor }

// Destruct stops the pool's idle workers when the last config using it is
// cleaned up; busy ones stop after their run.
func (h executorHandle) Destruct() error {
	if p, ok := h.exec.(*botrunner.Pool); ok {
		return p.Close()
	}
	return nil
}

// botLimits are the run limits this config sets.
func (a *App) botLimits() botrunner.Limits {
	return botrunner.Limits{
		MaxConcurrent:        a.BotMaxConcurrent,
		ProjectMaxConcurrent: a.BotProjectMaxConcurrent,
		QueueTimeout:         time.Duration(a.BotQueueTimeout),
		DefaultTimeout:       time.Duration(a.BotTimeout),
		MaxTimeout:           time.Duration(a.BotMaxTimeout),
	}
}

// checkBotLimits refuses a negative bot_max_timeout and a bot_timeout
// longer than it, and warns when one project may take every slot.
func (a *App) checkBotLimits() error {
	if lim := a.botLimits().WithDefaults(); lim.ProjectMaxConcurrent >= lim.MaxConcurrent {
		a.logger.Warn("no per-project bound on bot runs: one project can take every slot",
			zap.Int("bot_max_concurrent", lim.MaxConcurrent))
	}
	if a.BotMaxTimeout < 0 {
		return fmt.Errorf("invalid bot_max_timeout '%v': must be positive", time.Duration(a.BotMaxTimeout))
	}
	maxTimeout := time.Duration(a.BotMaxTimeout)
	if maxTimeout == 0 {
		maxTimeout = botrunner.DefaultMaxTimeout
	}
	if time.Duration(a.BotTimeout) > maxTimeout {
		return fmt.Errorf("bot_timeout %v is longer than bot_max_timeout %v", time.Duration(a.BotTimeout), maxTimeout)
	}
	return nil
}

// shareSlots takes this config's use of the shared run slots, creating them
// with this config's limits if no config holds them.
func (a *App) shareSlots() (*botrunner.Slots, error) {
	limits := a.botLimits()
	val, _, err := botSlots.LoadOrNew(botSlotsKey, func() (caddy.Destructor, error) {
		return slotsHandle{botrunner.NewSlots(limits)}, nil
	})
	if err != nil {
		return nil, err
	}
	a.slots = val.(slotsHandle).slots
	return a.slots, nil
}

// shareExecutor takes this config's use of the executor under key, creating
// it with newExec if no config holds it.
func (a *App) shareExecutor(key string, newExec func() (botrunner.Executor, error)) error {
	val, _, err := botExecutors.LoadOrNew(key, func() (caddy.Destructor, error) {
		exec, err := newExec()
		if err != nil {
			return nil, err
		}
		return executorHandle{exec}, nil
	})
	if err != nil {
		return err
	}
	a.executorKey = key
	a.runner = val.(executorHandle).exec
	return nil
}

// startBots applies this config's run limits to the shared slots. It runs
// in Start, once every app of the config has been provisioned, so a config
// that fails to load leaves the running config's limits alone.
func (a *App) startBots() {
	if a.slots == nil {
		return
	}
	limits := a.botLimits()
	a.slots.SetLimits(limits)
	l := a.slots.Limits()
	a.logger.Debug("bot run limits applied",
		zap.Int("max_concurrent", l.MaxConcurrent),
		zap.Int("project_max_concurrent", l.ProjectMaxConcurrent),
		zap.Duration("queue_timeout", l.QueueTimeout),
		zap.Duration("max_timeout", l.MaxTimeout))
}

// cleanupBots releases this config's use of the executor and the slots; the
// last config using an executor stops its idle workers.
func (a *App) cleanupBots() error {
	var err error
	if a.executorKey != "" {
		_, err = botExecutors.Delete(a.executorKey)
		a.executorKey, a.runner = "", nil
	}
	if a.slots != nil {
		if _, e := botSlots.Delete(botSlotsKey); err == nil {
			err = e
		}
		a.slots = nil
	}
	return err
}

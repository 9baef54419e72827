package caddymodule

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/botapi"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
)

// botAPI is a bot API over the fhirgate app's store and runners, as the
// HTTP handler and the MLLP handler each hold one.
type botAPI struct {
	*botapi.API
	// released is closed once the API's runs have ended and its use of
	// the store has been let go.
	released chan struct{}
}

// liveBotAPIs counts the bot APIs whose runs have not all ended, across
// every config this process loaded: an exit waits for all of them. Each
// one's Shutdown is bounded (its grace plus botapi's wait for stopped
// runs), so the wait is too.
var liveBotAPIs sync.WaitGroup

// newBotAPI builds a bot API for a module of this config. The API writes
// audit events and job results until its runs end, which can be after the
// app's Cleanup: Caddy cleans modules up in no fixed order, and a reload
// lets runs go on. So it holds its own use of the store, let go by a
// watcher once the runs have ended (at once when Caddy exits: the grace
// must start when the exit does, not at Cleanup).
//
// route names the module for the async jobs it accepts (botapi.Options.Route)
// and backends is its route to the FHIR backend for runs without a
// request (botapi.Options.Backends).
func newBotAPI(app *App, logger *zap.Logger, maxBody int64, route string, backends func(context.Context, *oauth.Identity) (*gateway.Backend, error)) (*botAPI, error) {
	if _, err := openStore(app.ctx, app.storage, logger); err != nil {
		return nil, fmt.Errorf("opening store: %w", err)
	}
	var mailer botapi.EmailSender
	if app.mailer != nil {
		mailer = app.mailer // a nil *email.Sender must stay a nil interface
	}
	api, err := botapi.New(botapi.Options{
		Store:          app.Store(),
		Queue:          app.store.queue,
		Route:          route,
		Backends:       backends,
		Runner:         app.runner,
		Compiler:       app.compiler,
		DefaultRuntime: app.BotDefaultRuntime,
		Egress:         app.egress,
		MaxBody:        maxBody,
		AuditRetention: time.Duration(app.AuditRetention),
		ShutdownGrace:  time.Duration(app.BotShutdownGrace),
		Logger:         logger,
		OnExecute:      observeBot,

		MaxCallsPerRequest: app.BotMaxCallsPerRequest,
		AsyncResultMax:     int(app.BotAsyncResultMax),
		ProjectRecordsMax:  app.ProjectBotRecordsMax,
		RecordsDiskReserve: uint64(max(app.BotRecordsDiskReserve, 0)),
		OnRecordRefused:    observeRecordRefused,
		Email:              mailer,
		RunTokens:          app.oauth,
	})
	if err != nil {
		_ = releaseStore(app.storage)
		return nil, err
	}
	b := &botAPI{API: api, released: make(chan struct{})}
	liveBotAPIs.Add(1)
	go func(storage storageModule) {
		defer liveBotAPIs.Done()
		defer close(b.released)
		select {
		case <-processExiting():
			api.Shutdown()
		case <-api.Done():
		}
		if err := releaseStore(storage); err != nil {
			logger.Error("releasing the store after the bot runs ended", zap.Error(err))
		}
	}(app.storage)
	return b, nil
}

// cleanup lets the bot runs of this config go on (a reload) or ends them
// within bot_shutdown_grace (Caddy is exiting), then writes the audit
// events still queued; the API's use of the store ends after that. It is
// nil-safe.
func (b *botAPI) cleanup(exiting bool) {
	if b == nil {
		return
	}
	if exiting {
		b.Shutdown()
		<-b.released // the store is closed before the process exits
		// The APIs of configs a reload replaced stop their runs on the
		// same exit (their watchers); the process must not end before
		// those runs have recorded how they ended either.
		liveBotAPIs.Wait()
		return
	}
	b.Close()
	select {
	case <-b.Done(): // no run was going: let the store go now (`caddy validate` exits next)
		<-b.released
	default: // runs go on; the watcher lets the store go when they end
	}
}

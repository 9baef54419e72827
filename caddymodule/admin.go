package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/adminapi"
	"github.com/fhirgate/fhirgate/internal/deploy"
	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/store"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI serves fhirgate's operator endpoints under /fhirgate/ on Caddy's
// admin listener (see package internal/adminapi for the routes). It is only
// reachable where Caddy's admin API is, by default localhost:2019.
type adminAPI struct {
	ctx    caddy.Context
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.fhirgate",
		New: func() caddy.Module { return new(adminAPI) },
	}
}

// Provision sets up the admin module. The admin endpoint is rebuilt before
// the config's apps are provisioned, so the app is looked up on first use.
func (a *adminAPI) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	a.logger = ctx.Logger()
	return nil
}

// Routes returns the admin routes.
func (a *adminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{
		Pattern: adminapi.Prefix,
		Handler: caddy.AdminHandlerFunc(a.serve),
	}}
}

// serve hands the request to the domain handler once the app exists.
func (a *adminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	h, err := a.resolve(r.Context())
	if err != nil {
		a.logger.Error("admin api request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.Int("status", http.StatusServiceUnavailable), zap.Error(err))
		fhir.WriteOutcome(w, http.StatusServiceUnavailable, err.Error())
		return nil
	}
	h.ServeHTTP(w, r)
	return nil
}

// resolve finds the fhirgate app of this config. A config without one (no
// global option and no fhirgate handler) has nothing to administer. The
// app is looked up per request (a map read): operator traffic is light, and
// the app may not exist yet when this module is provisioned.
//
// The app is that of the running config: Caddy provisions the admin
// endpoint of a new config before its apps, and keeps it when the load is
// refused, so this module's own config may be one that never ran. Only
// while the first config is still loading is there no running one; then
// the module's own config answers, once its app has started.
func (a *adminAPI) resolve(ctx context.Context) (http.Handler, error) {
	appVal, err := caddy.ActiveContext().AppIfConfigured("fhirgate")
	if errors.Is(err, caddy.ErrNotConfigured) {
		appVal, err = a.ctx.AppIfConfigured("fhirgate")
	}
	if errors.Is(err, caddy.ErrNotConfigured) {
		return nil, errors.New("the fhirgate app is not part of the running config")
	}
	if err != nil {
		return nil, fmt.Errorf("loading fhirgate app: %w", err)
	}
	app := appVal.(*App)
	if app.store == nil {
		return nil, errors.New("the fhirgate app is not ready")
	}
	if err := app.awaitDeclared(ctx); err != nil {
		return nil, fmt.Errorf("the fhirgate app is not ready: %w", err)
	}
	return app.adminHandler(a.logger), nil
}

// adminHandler builds the admin API over this app's store and services;
// it logs its 5xx answers to logger (the admin module's).
func (a *App) adminHandler(logger *zap.Logger) http.Handler {
	st := a.store.store
	db, canBackup := a.store.kv.(backupKV)
	return adminapi.New(adminapi.Options{
		Store:  st,
		Logger: logger,
		Deploy: func(ctx context.Context, botID, filename, code string) (*store.Bot, error) {
			return deploy.Deploy(ctx, st, a.compiler, botID, filename, code)
		},
		RotateKeys: func(ctx context.Context) (string, error) {
			key, err := a.tokens.Rotate(ctx)
			if err != nil {
				return "", err
			}
			a.logger.Info("signing key rotated", zap.String("kid", key.ID))
			return key.ID, nil
		},
		Backup: func(w io.Writer) error {
			if !canBackup {
				return errors.New("this storage cannot write backups")
			}
			return db.Backup(w)
		},
		Restore: func(r io.Reader) error {
			if !canBackup {
				return errors.New("this storage cannot load backups")
			}
			err := db.Restore(r)
			// Even a failed restore may have replaced some records.
			st.Invalidate()
			if err != nil {
				return err
			}
			// A backup from an older release brings its email index back.
			migrateEmailIndex(st, a.logger)
			migrateClientSecrets(st, a.logger)
			// The backup's signing keys (a Badger deployment moving to
			// PostgreSQL) verify its tokens from now on.
			if err := a.tokens.Reload(context.Background()); err != nil {
				return fmt.Errorf("store restored, but loading its signing keys: %w", err)
			}
			a.logger.Info("store restored from backup")
			return nil
		},
	})
}

// Interface guards
var (
	_ caddy.AdminRouter = (*adminAPI)(nil)
	_ caddy.Provisioner = (*adminAPI)(nil)
)

package caddymodule

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
)

func init() {
	caddy.RegisterModule(BadgerStorage{})
}

// BadgerStorage keeps the store in an embedded Badger database: one
// directory, owned by one Caddy process (Badger locks it). It is the
// default storage. Module ID `fhirgate.storage.badger`.
//
// Caddyfile, inside the `fhirgate` global option:
//
//	storage badger {
//		dir <path>
//	}
type BadgerStorage struct {
	// Dir is the directory of the Badger database, created (mode 0700) if
	// missing. Placeholders such as `{env.FHIRGATE_DIR}` are replaced.
	// Default: `fhirgate` under Caddy's data directory (e.g.
	// `~/.local/share/caddy/fhirgate`).
	Dir string `json:"dir,omitempty"`

	dir string // resolved: placeholders replaced, absolute, clean
}

// CaddyModule returns the Caddy module information.
func (BadgerStorage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "fhirgate.storage.badger",
		New: func() caddy.Module { return new(BadgerStorage) },
	}
}

// Provision resolves the directory; it opens nothing.
func (s *BadgerStorage) Provision(caddy.Context) error {
	dir := caddy.NewReplacer().ReplaceKnown(s.Dir, "")
	if dir == "" {
		if s.Dir != "" {
			return fmt.Errorf("storage directory %q is empty once its placeholders are replaced", s.Dir)
		}
		dir = filepath.Join(caddy.AppDataDir(), "fhirgate")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("resolving storage directory %q: %w", dir, err)
	}
	// "./data" and "/srv/data" name the same pool entry.
	s.dir = filepath.Clean(abs)
	return nil
}

func (s *BadgerStorage) storageKey() string { return "badger " + s.dir }

func (s *BadgerStorage) openKV(_ context.Context, logger *zap.Logger) (store.KV, error) {
	return badgerkv.Open(badgerkv.Options{Dir: s.dir, Logger: badgerLogger{logger.Sugar()}})
}

// badgerLogger sends Badger's log through zap. Badger narrates table
// loading and compaction at Info; that is detail to an operator, so it goes
// to Debug.
type badgerLogger struct{ s *zap.SugaredLogger }

func (l badgerLogger) Errorf(f string, a ...any)   { l.s.Errorf(f, a...) }
func (l badgerLogger) Warningf(f string, a ...any) { l.s.Warnf(f, a...) }
func (l badgerLogger) Infof(f string, a ...any)    { l.s.Debugf(f, a...) }
func (l badgerLogger) Debugf(f string, a ...any)   { l.s.Debugf(f, a...) }

// Interface guards
var (
	_ caddy.Provisioner = (*BadgerStorage)(nil)
	_ storageModule     = (*BadgerStorage)(nil)
	_ backupKV          = (*badgerkv.KV)(nil)
)

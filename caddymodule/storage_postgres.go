package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv"
)

func init() {
	caddy.RegisterModule(PostgresStorage{})
}

// PostgresStorage keeps the store in PostgreSQL, so that several gateway
// replicas can share it (docs/replicas.md). The schema is created or
// migrated when the config loads. Module ID `fhirgate.storage.postgres`.
//
// Caddyfile, inside the `fhirgate` global option:
//
//	storage postgres {
//		dsn       <dsn>
//		max_conns <n>
//		timeout   <duration>
//	}
type PostgresStorage struct {
	// DSN is the PostgreSQL connection string, a URL
	// (`postgres://user:password@host:5432/db?sslmode=verify-full`) or
	// key=value pairs; required. Placeholders are replaced, so the secret
	// can stay out of the config: `{env.FHIRGATE_POSTGRES_DSN}`. The DSN is
	// never logged, and passwords are removed from error messages.
	DSN string `json:"dsn,omitempty"`

	// MaxConns bounds the connections of this gateway's pool. Default: 16.
	MaxConns int `json:"max_conns,omitempty"`

	// Timeout bounds each store transaction, from BEGIN to COMMIT, so a
	// query that hangs (a lost network path, a lock held by a stuck
	// session) cannot hold a request: a write that runs out of it answers
	// 503 with Retry-After, as when the server is unreachable. Default: 15s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	dsn string // placeholders replaced; never logged
}

// CaddyModule returns the Caddy module information.
func (PostgresStorage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "fhirgate.storage.postgres",
		New: func() caddy.Module { return new(PostgresStorage) },
	}
}

// Provision replaces the DSN's placeholders; it connects to nothing.
func (s *PostgresStorage) Provision(caddy.Context) error {
	if s.DSN == "" {
		return errors.New("storage postgres: dsn is required")
	}
	s.dsn = caddy.NewReplacer().ReplaceKnown(s.DSN, "")
	if s.dsn == "" {
		// Name no value: a DSN written inline may hold a password.
		return errors.New("storage postgres: dsn is empty once its placeholders are replaced (is the environment variable set?)")
	}
	return nil
}

// Validate checks the pool settings.
func (s *PostgresStorage) Validate() error {
	if s.MaxConns < 0 || s.MaxConns > math.MaxInt32 {
		return fmt.Errorf("storage postgres: invalid max_conns %d: must be positive", s.MaxConns)
	}
	if s.Timeout < 0 {
		return fmt.Errorf("storage postgres: invalid timeout %v: must be positive", time.Duration(s.Timeout))
	}
	return nil
}

// storageKey is a hash of the DSN: the DSN itself holds a password, and
// the key ends up in error messages.
func (s *PostgresStorage) storageKey() string {
	sum := sha256.Sum256([]byte(s.dsn))
	return "postgres " + hex.EncodeToString(sum[:8])
}

func (s *PostgresStorage) openKV(ctx context.Context, logger *zap.Logger) (store.KV, error) {
	return pgkv.Open(ctx, pgkv.Options{
		DSN:      s.dsn,
		MaxConns: int32(s.MaxConns), //nolint:gosec // bounded by Validate
		Timeout:  time.Duration(s.Timeout),
		Logger:   logger.Named("postgres"),
	})
}

// Interface guards
var (
	_ caddy.Provisioner = (*PostgresStorage)(nil)
	_ caddy.Validator   = (*PostgresStorage)(nil)
	_ storageModule     = (*PostgresStorage)(nil)
)

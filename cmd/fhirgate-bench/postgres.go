package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// envPostgresDSN names the PostgreSQL server the harness creates its
// database on, as the tests do; without it, the project machines' server.
const envPostgresDSN = "FHIRGATE_TEST_POSTGRES"

const defaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/postgres"

// benchDatabase creates an empty database for this run on the test
// PostgreSQL server and returns its DSN and a func that drops it. An error
// means there is no server to measure against.
func benchDatabase(ctx context.Context, nonce string) (dsn string, drop func(), err error) {
	server := os.Getenv(envPostgresDSN)
	if server == "" {
		server = defaultPostgresDSN
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", nil, fmt.Errorf("%s is not a URL DSN: %w", envPostgresDSN, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, server)
	if err != nil {
		return "", nil, fmt.Errorf("no PostgreSQL server at %s (set %s): %w", u.Redacted(), envPostgresDSN, err)
	}
	defer conn.Close(context.Background())
	name := "fhirgate_bench_" + strings.ToLower(strings.NewReplacer("-", "_").Replace(nonce))
	if _, err := conn.Exec(cctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("creating database %s: %w", name, err)
	}
	u.Path = "/" + name
	drop = func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(dctx, server)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(dctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	}
	return u.String(), drop, nil
}

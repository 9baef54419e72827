// Package pgkvtest gives tests a real PostgreSQL. It is imported by tests
// only.
//
// The server is the one FHIRGATE_TEST_POSTGRES names (a URL or key=value
// DSN of a role that may create databases), else
// postgres://postgres@127.0.0.1:5432/postgres. The first test that asks
// creates a database with a random name for the test binary's run; [Main]
// drops it when the run ends. Each [DSN] is a fresh, empty schema in it, so
// tests running in parallel never see each other's tables.
//
// With no server answering, tests skip with a message saying how to run
// them, except under CI=true, where they fail: CI must not pass by
// skipping them.
//
// A package using it calls Main from its TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgkvtest.Main(m)) }
package pgkvtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// EnvDSN names the environment variable with the test server's DSN.
const EnvDSN = "FHIRGATE_TEST_POSTGRES"

// DefaultDSN is the server tried when EnvDSN is unset: the project
// machines' PostgreSQL (trust authentication).
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/postgres"

// connectTimeout bounds the first connection attempt, so a machine without
// a server skips quickly.
const connectTimeout = 5 * time.Second

var (
	once     sync.Once
	admin    string // the server's DSN, as given
	runDSN   string // the run's database
	dbName   string
	setupErr error
	schemas  atomic.Int64
)

// serverDSN returns the configured server DSN.
func serverDSN() string {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	return DefaultDSN
}

// describe names a DSN's server without its password, for messages.
func describe(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "an unparsable DSN"
	}
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

func setup() {
	admin = serverDSN()
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		setupErr = err
		return
	}
	defer conn.Close(context.Background())
	var b [6]byte
	_, _ = rand.Read(b[:])
	dbName = "fhirgate_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+dbName); err != nil {
		setupErr = fmt.Errorf("creating the test database: %w", err)
		dbName = ""
		return
	}
	runDSN, setupErr = withParam(admin, "dbname", dbName)
}

// DSN returns the DSN of a new, empty schema (first on its search_path) in
// the run's database. It skips tb when no server answers, or fails it
// under CI=true.
func DSN(tb testing.TB) string {
	tb.Helper()
	once.Do(setup)
	if setupErr != nil {
		msg := fmt.Sprintf("no PostgreSQL for tests at %s: %v; set %s to the DSN of a server whose user may create databases (the project's machines run one on 127.0.0.1:5432; start it with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`)",
			describe(serverDSN()), setupErr, EnvDSN)
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	schema := fmt.Sprintf("kv_%d", schemas.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, runDSN)
	if err != nil {
		tb.Fatalf("connecting to the test database: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("creating schema %s: %v", schema, err)
	}
	dsn, err := withParam(runDSN, "search_path", schema)
	if err != nil {
		tb.Fatal(err)
	}
	return dsn
}

// Exec runs sql on the database of dsn (as returned by DSN), for tests
// that look at or change the tables behind the code under test.
func Exec(tb testing.TB, dsn, sql string, args ...any) pgconn.CommandTag {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connecting to the test database: %v", err)
	}
	defer conn.Close(context.Background())
	tag, err := conn.Exec(ctx, sql, args...)
	if err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
	return tag
}

// QueryInt returns the single integer that sql selects on dsn's database.
func QueryInt(tb testing.TB, dsn, sql string, args ...any) int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connecting to the test database: %v", err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Main runs the tests and then drops the run's database, if one was
// created; it returns m.Run's exit code.
func Main(m *testing.M) int {
	code := m.Run()
	if dbName != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err == nil {
			_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)")
			_ = conn.Close(context.Background())
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "pgkvtest: dropping test database %s: %v\n", dbName, err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// withParam returns dsn with a connection parameter set: a query parameter
// of a URL (the database as its path), or a keyword of a key=value DSN.
// pgx sends parameters it does not know, such as search_path, to the
// server as run-time settings.
func withParam(dsn, key, value string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parsing the test DSN: %w", err)
		}
		if key == "dbname" {
			u.Path = "/" + value
			q := u.Query()
			q.Del("dbname")
			u.RawQuery = q.Encode()
			return u.String(), nil
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return dsn + " " + key + "=" + value, nil
}

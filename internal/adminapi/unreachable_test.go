package adminapi

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fhirgate/fhirgate/internal/fhirstore"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

func TestMain(m *testing.M) { os.Exit(pgkvtest.Main(m)) }

// TestPostgresDownOrHungAnswers503WithRetryAfter: on the PostgreSQL
// storage, a write that waits on a hung database past the storage's
// timeout, or finds the server gone, is answered 503 with Retry-After,
// not 500 and not held.
func TestPostgresDownOrHungAnswers503WithRetryAfter(t *testing.T) {
	dsn := pgkvtest.DSN(t)
	proxy, viaProxy := pgkvtest.ProxyFor(t, dsn)
	kv, err := pgkv.Open(context.Background(), pgkv.Options{DSN: viaProxy, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	st := store.New(kv, store.Options{})
	api := &testAPI{t: t, st: st, h: New(Options{Store: st, MaxBody: 4096})}
	api.mustCreate("Project", `{"resourceType":"Project","name":"before"}`)

	check := func(what string) {
		t.Helper()
		status, out, h := api.do("POST", "/fhirgate/Project", "application/json", `{"resourceType":"Project","name":"`+what+`"}`)
		if status != http.StatusServiceUnavailable || h.Get("Retry-After") != fhirstore.UnwritableRetryAfter {
			t.Fatalf("%s: %d Retry-After %q: %v; want 503 with Retry-After", what, status, h.Get("Retry-After"), out)
		}
	}

	// A session holding the table: the write waits, then gives up.
	ctx := context.Background()
	stuck, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close(ctx)
	if _, err := stuck.Exec(ctx, `BEGIN; LOCK TABLE fhirgate_kv IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	check("hung")
	if _, err := stuck.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}

	proxy.Cut()
	check("down")
}
